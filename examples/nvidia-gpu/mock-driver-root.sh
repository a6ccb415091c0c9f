#!/bin/sh
# drakit's per-node setup for NVIDIA's GPU kubelet plugin over mock NVML (examples/nvidia-gpu.yaml):
# makes a driver root at $1 as a GPU node's would look, from the mock built in $MOCK_NVML_DIR
# (k8s-test-infra's pkg/gpu/mocknvml after 'make': libnvidia-ml.so.<version> and configs/):
#
#   $1/usr/lib64/libnvidia-ml.so.<version>, .so.1, .so    the mock library
#   $1/config/config.yaml                                 mock-nvml-config-$MOCK_GPU_PROFILE.yaml with
#                                                         num_devices $MOCK_GPU_COUNT, driver <version>
#   $1/usr/bin/nvidia-smi                                 a stub that refuses to run (no real nvidia-smi here)
#   $1/dev/nvidia<N> (195:N), nvidiactl (195:255), nvidia-uvm, nvidia-uvm-tools (510:0, 510:1)
#   $1/proc/driver/nvidia/version, params
#
# Run again on an existing root it changes nothing that is already there. Exit 1 with one line on
# stderr when something it needs is missing.
set -eu
root=${1:?usage: mock-driver-root.sh DRIVER_ROOT}
profile=${MOCK_GPU_PROFILE:-gb200}
count=${MOCK_GPU_COUNT:-8}
fail() { echo "mock-driver-root: $*" >&2; exit 1; }
[ -n "${MOCK_NVML_DIR:-}" ] || fail "MOCK_NVML_DIR is not set: build the mock NVML (make in pkg/gpu/mocknvml of github.com/NVIDIA/k8s-test-infra) and name that folder"
lib=
for f in "$MOCK_NVML_DIR"/libnvidia-ml.so.*.*.*; do [ -f "$f" ] && [ ! -L "$f" ] && lib=$f; done
[ -n "$lib" ] || fail "no libnvidia-ml.so.<version> in MOCK_NVML_DIR=$MOCK_NVML_DIR: run make there"
version=${lib##*/libnvidia-ml.so.}
config=$MOCK_NVML_DIR/configs/mock-nvml-config-$profile.yaml
[ -f "$config" ] || fail "no GPU profile $profile: $config is missing (MOCK_GPU_PROFILE)"
case $count in ''|*[!0-9]*) fail "MOCK_GPU_COUNT=$count is not a number";; esac
[ "$count" -ge 1 ] && [ "$count" -le 8 ] || fail "MOCK_GPU_COUNT=$count: the mock serves 1 to 8 GPUs"
if [ -n "${NVIDIA_CDI_HOOK_PATH:-}" ]; then
  [ -x "$NVIDIA_CDI_HOOK_PATH" ] || fail "NVIDIA_CDI_HOOK_PATH=$NVIDIA_CDI_HOOK_PATH is not a program"
else
  fail "NVIDIA_CDI_HOOK_PATH is not set: build nvidia-cdi-hook (go install github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@v1.19.1) and name it"
fi

mkdir -p "$root/usr/lib64" "$root/usr/bin" "$root/config" "$root/dev" "$root/proc/driver/nvidia"
[ -f "$root/usr/lib64/libnvidia-ml.so.$version" ] || cp "$lib" "$root/usr/lib64/libnvidia-ml.so.$version"
ln -sfn "libnvidia-ml.so.$version" "$root/usr/lib64/libnvidia-ml.so.1"
ln -sfn libnvidia-ml.so.1 "$root/usr/lib64/libnvidia-ml.so"
# the profile, with this many GPUs and the library's version (the plugin looks for libraries by it)
sed -e "/^  num_devices:/d" -e "s|^\(  driver_version:\).*|\1 \"$version\"|" \
    -e "s|^\(  nvml_version:\).*|\1 \"12.$version\"|" -e "s|^system:|system:\n  num_devices: $count|" \
    "$config" > "$root/config/config.yaml"
if [ ! -f "$root/usr/bin/nvidia-smi" ]; then
  printf '#!/bin/sh\necho "nvidia-smi: a stub of drakit'"'"'s mock driver root (no real nvidia-smi here)" >&2\nexit 1\n' \
    > "$root/usr/bin/nvidia-smi"
  chmod 0755 "$root/usr/bin/nvidia-smi"
fi
node() { [ -e "$root/dev/$1" ] || mknod -m 0666 "$root/dev/$1" c "$2" "$3"; }
i=0
while [ "$i" -lt "$count" ]; do node "nvidia$i" 195 "$i"; i=$((i + 1)); done
node nvidiactl 195 255
node nvidia-uvm 510 0
node nvidia-uvm-tools 510 1
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  (mock NVML)\n' "$version" > "$root/proc/driver/nvidia/version"
printf '%s\n' "NVreg_DeviceFileUID: 0" "NVreg_DeviceFileGID: 0" "NVreg_DeviceFileMode: 438" \
    "NVreg_ModifyDeviceFiles: 1" > "$root/proc/driver/nvidia/params"
