"""Custom ops with a direct kernel: fff's ops, which a compiled model calls
once per layer and step.

torch.library.custom_op runs its kernel under a Python wrapper that looks
up the device's function and checks that no result aliases an input on
every call. After a call that swept the caches that wrapper ran cold:
about 60 us of a trained RMSNorm's 8-row backward call, a fifth of it.
`direct_op` defines the op in fff's torch.library fragment instead, from
the function's annotations as custom_op does, with the function itself as
the kernel of every device. The function must then keep what custom_op
checks: its results are new tensors, never its inputs or views of them.
It may return views of tensors it made itself (rows reshaped to the
input's shape, say): the kernel detaches them, since autograd forbids
changing in place a view that a custom Function returned, and a model may
change a norm's result in place (Switch Transformers' router multiplies it
by jitter noise)."""

import torch

_LIBRARY = torch.library.Library("fff", "FRAGMENT")


class DirectOp:
    """A custom op defined by `direct_op`; calling it calls the op."""

    def __init__(self, qualname):
        self.qualname = qualname
        namespace, self.name = qualname.split("::")
        self.overload = getattr(getattr(torch.ops, namespace), self.name).default
        self.differentiable = False

    def register_fake(self, fake):
        """Registers `fake` as the op's FakeTensor kernel (a decorator, as
        custom_op's)."""
        torch.library.register_fake(self.qualname, fake, lib=_LIBRARY)
        return fake

    def register_autograd(self, backward, setup_context=None):
        """The op's gradient, as custom_op's register_autograd takes it. An
        op without one is a gradient itself: it is never differentiated.

        torch would run the op as if it had no forward-mode derivative: under
        torch.func.jvp (jacfwd, hessian) its tangents came out zero, under
        torch.autograd.forward_ad none, with no error. The op's autograd
        kernel, where both transforms' tangents are still on its inputs,
        refuses them before it runs the kernel torch.library's
        register_autograd would have registered. That kernel's maker is
        torch's own, not public: a torch without it gets the public
        registration, and direct calls go unchecked under forward mode."""
        self.differentiable = True
        try:
            from torch._library.autograd import Info, make_autograd_impl

            differentiate = make_autograd_impl(self.overload, Info(backward, setup_context))
        except (ImportError, AttributeError, TypeError):
            torch.library.register_autograd(self.qualname, backward, setup_context=setup_context, lib=_LIBRARY)
            return
        what = f"fff's {self.name}"

        def autograd_kernel(keyset, *args, **kwargs):
            _refuse_tangents(what, args)
            return differentiate(keyset, *args, **kwargs)
        _LIBRARY.impl(self.name, autograd_kernel, "Autograd", with_keyset=True)

    def __call__(self, *args, **kwargs):
        if self.differentiable:
            refuse_forward_mode(f"fff's {self.name}", args)
        return self.overload(*args, **kwargs)


def direct_op(qualname):
    """Decorator: defines the op `qualname` ("fff::name") with the schema of
    the decorated function's annotations and the function as its kernel on
    every device."""
    def define(function):
        name = qualname.split("::")[1]
        _LIBRARY.define(name + torch.library.infer_schema(function, mutates_args=()))

        def kernel(*args, **kwargs):
            results = function(*args, **kwargs)
            if isinstance(results, (tuple, list)):
                return type(results)(map(_detached, results))
            return _detached(results)
        _LIBRARY.impl(name, kernel, "CompositeExplicitAutograd")
        return DirectOp(qualname)
    return define


def _detached(result):
    """A result that no autograd view relation ties to the tensor it was
    made from: the same memory, at no copy."""
    return result.detach() if isinstance(result, torch.Tensor) and result._is_view() else result


def refuse_forward_mode(what, inputs=()):
    """Raises where `what` (fff's TreeFFN, say) would run under forward-mode
    AD: torch.func.jvp (jvp, jacfwd, hessian) on the stack, or a forward-AD
    tangent on one of the tensors of `inputs`. torch runs a custom op as if
    it had no derivative there: every tangent through it came out zero, or
    none, with no error. A compiled model is traced with fake tensors,
    outside any transform, and is not checked (the backend checks its
    graph)."""
    if torch.compiler.is_compiling():
        return
    from torch._C._functorch import TransformType, get_interpreter_stack

    if any(level.key() == TransformType.Jvp for level in get_interpreter_stack() or ()):
        raise forward_mode_refusal(what)
    _refuse_tangents(what, inputs)


def _refuse_tangents(what, inputs):
    """Raises where a tensor of `inputs` (or of a list among them) carries a
    forward-AD tangent."""
    from torch.autograd.forward_ad import unpack_dual

    for value in inputs:
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, torch.Tensor) and unpack_dual(t).tangent is not None:
                raise forward_mode_refusal(what)


def forward_mode_refusal(what):
    """The error for `what` under forward-mode AD."""
    return RuntimeError(f"{what} has no forward-mode derivative: under torch.func.jvp (jvp, jacfwd, hessian) or "
                        f"torch.autograd.forward_ad its tangents would be zero; differentiate it in reverse mode, "
                        f"with torch.autograd")
