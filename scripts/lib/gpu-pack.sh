# Sourced by the scripts that run on the GPU machine over a pack from scripts/gpu-build (with $pack
# set): unpacks the pack's compressed libraries and ONNX test data, and points the loader and the
# model tests at them.
for f in "$pack"/deps/*.xz "$pack"/lib/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
export LD_LIBRARY_PATH="$pack/lib:$pack/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The GPU image has no libonnx-testdata package; the pack carries its data compressed.
if [ -f "$pack/onnx-testdata.tar.xz" ] && [ ! -d "$pack/onnx-testdata/data" ]; then
  mkdir -p "$pack/onnx-testdata" && tar -C "$pack/onnx-testdata" -xJf "$pack/onnx-testdata.tar.xz"
fi
[ -d "$pack/onnx-testdata/data" ] && export ONNX_TESTDATA_DIR="$pack/onnx-testdata/data"
true
