"""Transformer FFN sublayers (a norm, a tree layer, residual adds) as fff
modules, for the tests of fused sublayer kernels: the MLIR of each form,
random inputs, and a float64 reference that rounds where the unfused ops
store their storage-type results.

Forms: "pre" h + tree(norm(h)); "pre_prologue" the same with h = x + a
computed (and returned); "pre_plain" tree(norm(x)), where Din may differ
from Dout; "post" norm(h + tree(h)); "post_computed" the same with
h = x + a.
"""

import math

import numpy as np

from fffcheck import leaf_tree_ffn_ref, quantize, tensor_type, tree_ffn_ref

STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


class Sublayer:
    """One sublayer function, @name: `norm` is layer_norm or rms_norm, `tree`
    is "tree" (tree_ffn with `trees` trees) or "leaf" (leaf_tree_ffn with
    leaves `width` wide)."""

    def __init__(self, name, dtype, form, norm, tree, din, dout, depth, trees=1, width=16, activation="gelu"):
        self.name, self.dtype, self.form, self.norm, self.tree = name, dtype, form, norm, tree
        self.din, self.dout, self.depth, self.trees, self.width = din, dout, depth, trees, width
        self.activation = activation
        self.nodes = 2 ** (depth + 1) - 1 if tree == "tree" else 2 ** depth - 1

    # --- The module -------------------------------------------------------

    def weight_shapes(self):
        if self.tree == "tree":
            t, n = self.trees, self.nodes
            return [(t, n, self.din), (t, n), (t, n, self.dout), (self.dout,)]
        leaves = 2 ** self.depth
        return [(self.nodes, self.din), (self.nodes,), (leaves, self.din, self.width), (leaves, self.width),
                (leaves, self.width, self.dout), (leaves, self.dout)]

    def weight_scales(self):
        if self.tree == "tree":
            return [1 / math.sqrt(self.din), 0.5, 1.0, 0.5]
        return [1 / math.sqrt(self.din), 0.5, 1 / math.sqrt(self.din), 0.5, 1 / math.sqrt(self.width), 0.5]

    def norm_width(self):
        return self.din if self.form.startswith("pre") else self.dout

    def arguments(self):
        """(name, shape) of every argument, batch dim None."""
        args = [("x", (None, self.din))]
        if self.form in ("pre_prologue", "post_computed"):
            args.append(("a", (None, self.din)))
        args.append(("g", (self.norm_width(),)))
        if self.norm == "layer_norm":
            args.append(("b", (self.norm_width(),)))
        args += [(f"w{i}", shape) for i, shape in enumerate(self.weight_shapes())]
        return args

    def mlir(self):
        t = lambda shape: tensor_type(shape, self.dtype)
        xin, xout = t((None, self.din)), t((None, self.dout))
        wts = [t(s) for s in self.weight_shapes()]

        def norm(value):
            width = t((self.norm_width(),))
            if self.norm == "layer_norm":
                return (f"fff.layer_norm {value} scale(%g : {width}) bias(%b : {width}) "
                        f"{{epsilon = 1.0e-05 : f32}} : {t((None, self.norm_width()))}")
            return f"fff.rms_norm {value} scale(%g : {width}) {{epsilon = 1.0e-06 : f32}} : {t((None, self.norm_width()))}"

        def tree(value):
            attrs = f"{{depth = {self.depth} : i64, activation = #fff.activation<{self.activation}>}}"
            if self.tree == "tree":
                return (f"fff.tree_ffn {value}, %w0 bias(%w1 : {wts[1]}), %w2 bias(%w3 : {wts[3]}) {attrs} "
                        f": {xin}, {wts[0]}, {wts[2]}")
            return f"fff.leaf_tree_ffn {value}, %w0, %w1, %w2, %w3, %w4, %w5 {attrs} : {xin}, {', '.join(wts)}"

        body = {
            "pre": [f"%n = {norm('%x')}", f"%t = {tree('%n')}", f"%y = arith.addf %x, %t : {xout}"],
            "pre_prologue": [f"%h = arith.addf %x, %a : {xin}", f"%n = {norm('%h')}", f"%t = {tree('%n')}",
                             f"%y = arith.addf %h, %t : {xout}"],
            "pre_plain": [f"%n = {norm('%x')}", f"%y = {tree('%n')}"],
            "post": [f"%t = {tree('%x')}", f"%s = arith.addf %x, %t : {xout}", f"%y = {norm('%s')}"],
            "post_computed": [f"%h = arith.addf %x, %a : {xin}", f"%t = {tree('%h')}",
                              f"%s = arith.addf %h, %t : {xout}", f"%y = {norm('%s')}"],
        }[self.form]
        results = [("%h", xin), ("%y", xout)] if self.form == "pre_prologue" else [("%y", xout)]
        params = ", ".join(f"%{name}: {t(shape)}" for name, shape in self.arguments())
        lines = "\n".join("  " + line for line in body)
        return (f"func.func @{self.name}({params}) -> ({', '.join(ty for _, ty in results)}) {{\n{lines}\n"
                f"  return {', '.join(v for v, _ in results)} : {', '.join(ty for _, ty in results)}\n}}\n")

    def result_shapes(self, batch):
        widths = [self.din, self.dout] if self.form == "pre_prologue" else [self.dout]
        return [((batch, w), STORAGE[self.dtype]) for w in widths]

    # --- Data and the reference -------------------------------------------

    def inputs(self, rng, batch):
        """{name: (array in storage type, float64 values)}."""
        values = {}
        for name, shape in self.arguments():
            shape = tuple(batch if d is None else d for d in shape)
            if name in ("x", "a"):
                values[name] = quantize(rng.standard_normal(shape) + 0.3, self.dtype)
            elif name == "g":
                values[name] = quantize(1 + 0.5 * rng.standard_normal(shape), self.dtype)
            elif name == "b":
                values[name] = quantize(0.5 * rng.standard_normal(shape), self.dtype)
            else:
                scale = self.weight_scales()[int(name[1:])]
                values[name] = quantize(scale * rng.standard_normal(shape), self.dtype)
        return values

    def reference(self, v):
        rnd = lambda array: quantize(array, self.dtype)[1]
        g = v["g"][1]

        def norm(h):
            if self.norm == "layer_norm":
                centred = h - h.mean(-1, keepdims=True)
                return rnd(centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5) * g + v["b"][1])
            return rnd(h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * g)

        weights = [v[f"w{i}"][1] for i in range(len(self.weight_shapes()))]

        def tree(h):
            ref = tree_ffn_ref if self.tree == "tree" else leaf_tree_ffn_ref
            return rnd(ref(h, *weights, self.depth, self.activation))

        x = v["x"][1]
        if self.form == "pre":
            return [rnd(x + tree(norm(x)))]
        if self.form == "pre_prologue":
            h = rnd(x + v["a"][1])
            return [h, rnd(h + tree(norm(h)))]
        if self.form == "pre_plain":
            return [tree(norm(x))]
        h = x if self.form == "post" else rnd(x + v["a"][1])
        return [norm(rnd(h + tree(h)))]
