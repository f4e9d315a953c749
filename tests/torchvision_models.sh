#!/usr/bin/env bash
# ctest driver for torchvision's models exported to ONNX (scripts/export-models):
#   torchvision_models.sh export OUT_DIR MODELS   exports them (PyTorch's output on the same input)
#   torchvision_models.sh check OUT_DIR MODEL GALLEY   `galley run --check` on the cpu
# Exits 77 (ctest's skip) when Debian's python3 lacks torch, torchvision or onnx, so neither step
# can have run; scripts/install-deps installs them.
set -euo pipefail
step=$1 out=$2
if ! /usr/bin/python3 -c "import torch, torchvision, onnx" >/dev/null 2>&1; then
  echo "python3-torchvision or python3-onnx missing: skipped (scripts/install-deps installs them)"
  exit 77
fi
case "$step" in
  export) exec "$(dirname "$0")/../scripts/export-models" "$out" --models "$3" ;;
  check) exec "$4" run "$out/$3/model.onnx" --inputs "$out/$3/test_data_set_0" --check --device cpu ;;
  *) echo "torchvision_models.sh: unknown step '$step'" >&2; exit 2 ;;
esac
