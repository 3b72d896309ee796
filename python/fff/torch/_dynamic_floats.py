"""Python floats that Dynamo traces as graph inputs. Under
torch.compile(..., dynamic=True) (Dynamo's specialize_float off), a float
that a model reads, a norm's eps, becomes a graph input whose item() is a
SymFloat. fff's ops take eps, and the constants of a region's pointwise
work, as constants. So where fff would take work that reads such a float
and the model holds it (an attribute, a config's entry, a global), fff asks
Dynamo to trace the frame again with the float a constant, guarded on its
value: what Inductor does for a float it cannot make a tensor, through the
same two names of Dynamo's. A float the caller passes in (an argument) may
change at every call, and each value would compile again: fff leaves the
work that reads it to the fallback."""

import torch

from ._nodes import example_value


def _float_symbols(value):
    if not isinstance(value, torch.SymFloat):
        return set()
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    return {str(s) for s in value.node.expr.free_symbols if symbol_is_type(s, SymT.FLOAT)}


def _origins(node):
    """The placeholders `node` is computed from."""
    origins, seen, stack = [], {node}, [node]
    while stack:
        current = stack.pop()
        if current.op == "placeholder":
            origins.append(current)
        for n in current.all_input_nodes:
            if n not in seen:
                seen.add(n)
                stack.append(n)
    return origins


def _held_by_the_model(placeholder, holders):
    """Whether Dynamo read the input `placeholder` off an attribute or a
    global (its sources of the classes `holders`), rather than off the
    call's arguments alone."""
    source = getattr(placeholder, "_dynamo_source", None)
    while source is not None:
        if isinstance(source, holders):
            return True
        source = getattr(source, "base", None)
    return False


def restart_with_constant_floats(values):
    """Raises Dynamo's TensorifyScalarRestartAnalysis, with the dynamic
    floats among `values` (nodes; anything else is skipped) that the model
    holds marked to be constants, where one of them is not marked yet.
    Returns otherwise: there is none, or Dynamo traced one dynamic again
    after being asked (fff then leaves the work that reads it)."""
    try:
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._dynamo.source import AttrSource, GlobalSource
        from torch._dynamo.symbolic_convert import TensorifyState
    except ImportError:  # a torch without them: the work stays with the fallback
        return
    symbols = set()
    for value in values:
        if isinstance(value, torch.fx.Node):
            found = _float_symbols(example_value(value))
            if found and all(_held_by_the_model(p, (AttrSource, GlobalSource)) for p in _origins(value)):
                symbols |= found
    unmarked = sorted(s for s in symbols if not TensorifyState.should_specialize(s))
    if not unmarked:
        return
    for symbol in unmarked:
        TensorifyState.specialize(symbol)
    raise TensorifyScalarRestartAnalysis(restart_reason=f"fff takes {', '.join(unmarked)} as constants")
