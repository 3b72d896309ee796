"""What the backend took from the graphs it was given, what it left and why."""

import collections
import dataclasses
import logging

from ._nodes import op_name

log = logging.getLogger("fff.torch")


@dataclasses.dataclass
class Region:
    """One fff call the backend put in a graph: `kind` is the custom op
    (`fff::region`, `fff::tree_sublayer`, `fff::tree_ffn`, ...), `taken` the
    fff ops it computes, `ops` the torch ops it stands for, `pipeline` the
    fff pipeline (`cpu` or `gpu`) that compiled the code it runs (`torch`
    for a backward that runs in torch ops: the leaf tree's)."""

    kind: str
    taken: collections.Counter
    ops: list
    index: int | None = None  # fff::region's index, for a region
    pipeline: str = "cpu"
    # Why the call copies some of its inputs (_devices.copied_inputs).
    copies: list = dataclasses.field(default_factory=list)

    def __str__(self):
        computes = ", ".join(f"{name} x{count}" if count > 1 else name for name, count in sorted(self.taken.items()))
        copies = "".join(f"; {reason}" for reason in self.copies)
        return f"{self.kind} [{self.pipeline}]: {computes} ({len(self.ops)} torch ops: {', '.join(self.ops)}){copies}"


@dataclasses.dataclass
class Report:
    """What fff took from the graphs it was given, and what it left and why.
    `taken` counts fff's ops by name (`layer_norm`, `layer_norm` without
    affine parameters as `layer_norm (no affine)`, `rms_norm`, `tree_ffn`,
    ...); `left` counts (op, reason) pairs; `ops` and `ops_taken` count the
    graphs' torch ops in all and in fff's hands; `regions` lists each fff
    call the backend put in a graph, and `calls` counts them: the fff calls
    one run of every graph makes (a forward, when each graph runs once)."""

    graphs: int = 0
    ops: int = 0
    ops_taken: int = 0
    taken: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    left: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    regions: list = dataclasses.field(default_factory=list)
    fallback: str = ""
    grad: bool = False
    # Training graphs: `backward` lists the fff calls that the forward's
    # trained norms run in the backward graph, and `backward_taken` counts
    # their ops by name (`layer_norm_grad`, `rms_norm_grad`);
    # explain(backward=True) counts the calls one backward made in
    # `backward_calls`; of them, `backward_residual_grads` counts those that
    # added the residual stream's gradient to dx, and `backward_dy_masks`
    # those that applied a dropout's mask to dy (_backward_fusion.py).
    training: bool = False
    backward: list = dataclasses.field(default_factory=list)
    backward_taken: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    backward_calls: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    backward_residual_grads: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    backward_dy_masks: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def calls(self):
        return len(self.regions)

    def leave(self, node_or_name, reason):
        name = node_or_name if isinstance(node_or_name, str) else op_name(node_or_name)
        self.left[(name, reason)] += 1
        log.info("fff left %s: %s", name, reason)

    def take(self, kind, taken, nodes, index=None, pipeline="cpu", copies=()):
        """Records an fff call of `kind` standing for `nodes` (Dynamo's, or
        their names), whose code `pipeline` compiled, and which copies
        inputs for the reasons `copies`."""
        region = Region(kind, collections.Counter(taken), _op_names(nodes), index, pipeline, list(copies))
        self.regions.append(region)
        self.taken.update(region.taken)
        self.ops_taken += len(region.ops)
        log.info("fff took %s", region)

    def take_backward(self, kind, taken, nodes, pipeline="cpu"):
        """Records the backward fff call of `kind` that the forward's call for
        `nodes` brings into the backward graph."""
        region = Region(kind, collections.Counter(taken), _op_names(nodes), pipeline=pipeline)
        self.backward.append(region)
        self.backward_taken.update(region.taken)
        log.info("fff's backward takes %s", region)

    def untake(self, region):
        """Forgets `region`, which a larger fff call now holds."""
        self.regions.remove(region)
        self.taken.subtract(region.taken)
        self.taken += collections.Counter()  # drops the counts now zero
        self.ops_taken -= len(region.ops)

    def __str__(self):
        share = f"{self.ops_taken} of {self.ops} ops" if self.ops else "nothing"
        mode = f" (fallback {self.fallback}, grad {'on' if self.grad else 'off'})" if self.fallback else ""
        lines = [f"fff took {share} in {self.graphs} graph(s){mode}, as {self.calls} fff call(s):"]
        lines += [f"  {name} x{count}" for name, count in sorted(self.taken.items())] or ["  nothing"]
        if self.regions:
            lines.append("in these calls:")
            lines += [f"  {region}" for region in self.regions]
        lines.append("and left:")
        lines += [f"  {name} x{count}: {reason}" for (name, reason), count in sorted(self.left.items())] \
            or ["  nothing"]
        if self.training:
            lines.append(f"backward: {len(self.backward)} fff call(s) in the backward graph(s); the rest of the "
                         f"backward goes to {self.fallback}:")
            lines += [f"  {name} x{count}" for name, count in sorted(self.backward_taken.items())] or ["  nothing"]
            if self.backward:
                lines.append("in these calls:")
                lines += [f"  {region}" for region in self.backward]
            if self.backward_calls:
                lines.append("one backward ran: " + ", ".join(
                    f"{name} x{count}" for name, count in sorted(self.backward_calls.items())))
            if self.backward_residual_grads:
                lines.append("of which added the residual stream's gradient to dx as they wrote it: " + ", ".join(
                    f"{name} x{count}" for name, count in sorted(self.backward_residual_grads.items())))
            if self.backward_dy_masks:
                lines.append("of which applied a dropout's mask to dy as they read it: " + ", ".join(
                    f"{name} x{count}" for name, count in sorted(self.backward_dy_masks.items())))
        return "\n".join(lines)


def _op_names(nodes):
    """The ops `nodes` (Dynamo's, or their names) stand for, by name: an op
    fff raised from others (_masked_trees.py) stands for those."""
    names = []
    for n in nodes:
        names += [n] if isinstance(n, str) else n.meta.get("fff_raised_ops", [op_name(n)])
    return names
