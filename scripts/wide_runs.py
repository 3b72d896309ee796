"""What scripts/transformers-wide.py, timm-wide.py, diffusers-wide.py and
domains-wide.py share: the transformers corpus's helpers and tolerances,
their command line's --scenario and --plain, how they compile a model,
run it against eager and compare gradients, and the loop that runs each model's scenarios against eager,
prints one line per run and sums up the failures. Each script keeps its
models, scenarios and checks."""

import functools
import importlib.util
import os
import sys
import time
import traceback


@functools.cache
def load_corpus():
    """test/Frontends/transformers-corpus.py as a module: its compare,
    gradient_error, step_gradients, tolerances and inputs."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "Frontends",
                        "transformers-corpus.py")
    spec = importlib.util.spec_from_file_location("corpus", path)
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus


def gradients_differ(actual, expected, where="", tolerance=1e-4):
    """Why the gradients `actual` (by name) are not `expected`'s, each
    within `tolerance` of it (the corpus's gradient_error); None where they
    are. `where` ("shape [2, 8]: ", say) starts a gradient's miss."""
    if actual.keys() != expected.keys():
        return f"gradients of {sorted(set(actual) ^ set(expected))} differ in presence"
    for path, e in expected.items():
        error = load_corpus().gradient_error(actual[path], e)
        if not error <= tolerance:
            return f"{where}the gradient of {path} is off by {error:.2g} (relative)"
    return None


# --plain: the fallback alone, without fff.
PLAIN = {"on": False}


def take_plain(argv):
    """Sets PLAIN from `argv`'s --plain, which `argv` loses."""
    PLAIN["on"] = take_flag(argv, "--plain")


def compiled_with(model, report, fallback="inductor", **options):
    """`model` under torch.compile with fff's backend and `fallback`, its
    report in `report` and `options` its further options; under --plain,
    with the fallback alone."""
    import torch
    import fff.torch

    torch._dynamo.reset()
    if PLAIN["on"]:
        return torch.compile(model, backend=fallback)
    return torch.compile(model, backend=lambda gm, example: fff.torch.backend(gm, example, report=report,
                                                                             fallback=fallback, **options))


def forward_differs(model, batches, inputs):
    """(report, why) of `model` in eval and no_grad, compiled against
    eager at each of `batches`: inputs(batch, i) gives the i-th batch's
    keyword inputs; `why` is None where every output agrees (f32)."""
    import torch
    import fff.torch

    model = model.eval()
    report = fff.torch.Report()
    compiled = compiled_with(model, report)
    with torch.no_grad():
        for i, batch in enumerate(batches):
            args = inputs(batch, i)
            wrong = load_corpus().compare(compiled(**args), model(**args), torch.float32)
            if wrong:
                return report, f"batch {batch}: {wrong}"
    return report, None


def training_differs(model, batches, inputs):
    """(report, why) of a training step of `model`, compiled against eager
    at each of `batches` (inputs(batch, 5 + i)): every parameter's and
    float input's gradient (the corpus's step_gradients); `why` is None
    where they all agree."""
    import copy

    import fff.torch

    model = model.train()
    reference = copy.deepcopy(model)
    report = fff.torch.Report()
    compiled = compiled_with(model, report)
    for i, batch in enumerate(batches):
        args = inputs(batch, 5 + i)
        actual, expected = (load_corpus().step_gradients(run, module, args, True)
                            for run, module in ((compiled, model), (reference, reference)))
        wrong = gradients_differ(actual, expected, f"batch {batch}: ")
        if wrong:
            return report, wrong
    return report, None


def take_dynamic(argv):
    """--dynamic in `argv` (which loses it): every extent dynamic from the
    first call, as torch.compile(dynamic=True) (Dynamo's
    assume_static_by_default off), and floats too (specialize_float is
    off by default)."""
    if take_flag(argv, "--dynamic"):
        import torch

        torch._dynamo.config.assume_static_by_default = False


def take_flag(argv, flag):
    """Whether `flag` is in `argv`, which loses it."""
    if flag not in argv:
        return False
    argv.remove(flag)
    return True


def take_scenarios(argv, default):
    """The scenarios that `--scenario a,b` names in `argv` (which loses
    them), or `default`."""
    if "--scenario" not in argv:
        return list(default)
    i = argv.index("--scenario")
    scenarios = argv[i + 1].split(",")
    del argv[i:i + 2]
    return scenarios


def first_line(error, limit):
    return (str(error).strip().splitlines() or [""])[0][:limit]


def run_all(names, scenarios, builds, run, report_line, width):
    """Runs run(name, scenario) -> (report, wrong) for each name whose eager
    run builds(name) does not raise; `wrong` is None where the results
    agree, "n/a" where the scenario does not apply. Returns the exit
    status: 1 if any run was wrong or raised."""
    fails = []
    for name in names:
        try:
            builds(name)
        except Exception as error:
            print(f"{name:{width}} SKIP eager: {type(error).__name__}: {first_line(error, 150)}", flush=True)
            continue
        for what in scenarios:
            start = time.time()
            try:
                report, wrong = run(name, what)
                if wrong == "n/a":
                    continue
                outcome = "WRONG " + wrong if wrong else "ok"
                took = report_line(report)
            except Exception as error:
                outcome = f"CRASH {type(error).__name__}: {first_line(error, 300)}"
                took = "?"
                traceback.print_exc(file=sys.stderr)
            if outcome != "ok":
                fails.append((name, what, outcome))
            print(f"{name:{width}} {what:11} {time.time() - start:5.1f}s {outcome}  took: {took}", flush=True)
    print(f"{len(fails)} failure(s)")
    for failure in fails:
        print("  ", *failure)
    return 1 if fails else 0
