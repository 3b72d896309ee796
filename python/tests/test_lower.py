"""fff.lower: MLIR text through a pipeline, and its errors as FFFError."""

import pytest

import fff

RMS_NORM = """
func.func @rms_norm(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}
"""


def test_cpu_pipeline_gives_llvm_dialect():
    text = fff.lower(RMS_NORM, "fff-cpu-pipeline")
    assert "llvm.func @rms_norm" in text and "fff." not in text


def test_gpu_pipeline_with_options_gives_ptx():
    text = fff.lower(RMS_NORM, "fff-gpu-pipeline{chip=sm_90}")
    assert "gpu.binary @fff_kernels" in text and ".entry rms_norm_bf16_768_warp_per_row" in text


def test_a_single_pass():
    assert "fff.fusion" not in fff.lower(RMS_NORM, "fff-fuse-norms")
    assert "tensor.dim" not in fff.lower(RMS_NORM, "builtin.module(fff-insert-shape-checks)")


@pytest.mark.parametrize("ir, pipeline, message", [
    (RMS_NORM, "fff-gpu-pipeline{chip=sm_95}", "unknown GPU chip 'sm_95'"),
    (RMS_NORM, "no-such-pass", "no-such-pass"),
    ("func.func @f(", "fff-cpu-pipeline", "expected"),
    ("func.func @f(%x: tensor<4x8xf32>, %w: tensor<0x3x8xf32>) -> tensor<4x8xf32> {\n"
     "  %y = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<0x3x8xf32>, tensor<0x3x8xf32>\n"
     "  return %y : tensor<4x8xf32>\n}", "fff-cpu-pipeline", "a tree layer needs at least one tree"),
])
def test_errors_are_one_line(ir, pipeline, message):
    with pytest.raises(fff.FFFError) as error:
        fff.lower(ir, pipeline)
    assert message in str(error.value)
    assert "\n" not in str(error.value).strip()
