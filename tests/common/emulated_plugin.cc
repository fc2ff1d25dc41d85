// libtempo-gpu-emulated.so: the emulated GPU (emulated_device.h) as a GPU runtime plugin, so
// that whole programs (the perf tools under tempo-run, several processes) run on device
// buffers where there is no GPU: TEMPO_GPU=<path to this file> loads it in place of the
// HIP or CUDA plugin. Its device memory faults on any host access, so a program that
// passes the perf tools' checks on it never touched device memory from the host.
#include <type_traits>

#include "tests/common/emulated_device.h"

extern "C" __attribute__((visibility("default"))) tempo::mem::DeviceApi* tempo_gpu_plugin_v3(char*, size_t) {
  static_assert(std::is_same_v<decltype(&tempo_gpu_plugin_v3), tempo::mem::GpuPluginEntry>);
  // Never destroyed: its stream threads may still run host functions at exit.
  static auto* device = new tempo::testing::EmulatedDevice(/*install=*/false);
  return device;
}
