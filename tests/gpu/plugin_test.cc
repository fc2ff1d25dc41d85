// How the library finds its GPU runtime (src/mem/device_api.h): TEMPO_GPU=off and a plugin
// that cannot be loaded leave host memory only; the real plugin, loaded by path, serves
// device buffers where the runtime finds a GPU and explains itself where it does not.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "src/mem/device_api.h"

namespace tempo::mem {
namespace {

const std::string kPlugin = TEMPO_GPU_PLUGIN;  // this build's libtempo-gpu-<backend>.so

TEST(GpuPlugin, OffMeansHostMemoryOnly) { EXPECT_EQ(nullptr, loadDeviceApi("off")); }

TEST(GpuPlugin, APluginThatCannotBeLoadedMeansHostMemoryOnly) {
  EXPECT_EQ(nullptr, loadDeviceApi("/nonexistent/libtempo-gpu-none.so"));
  EXPECT_EQ(nullptr, loadDeviceApi("libc.so.6"));  // loads, but has no entry point
}

TEST(GpuPlugin, ThePluginServesDeviceBuffersOrSaysWhyNot) {
  void* handle = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nullptr, handle) << dlerror();
  auto entry = reinterpret_cast<GpuPluginEntry>(dlsym(handle, kGpuPluginEntry));
  ASSERT_NE(nullptr, entry) << kPlugin << " does not export " << kGpuPluginEntry;
  char why[256] = "";
  DeviceApi* api = entry(why, sizeof why);
  DeviceApi* loaded = loadDeviceApi(kPlugin);
  EXPECT_EQ(api, loaded);  // the same process-wide runtime, or none for the same reason
  if (!api) {
    // No GPU here: the reason names the backend and the runtime's error.
    const std::string reason = why;
    EXPECT_TRUE(reason.rfind("HIP: ", 0) == 0 || reason.rfind("CUDA: ", 0) == 0) << reason;
    GTEST_SKIP() << "no GPU here: " << reason;
  }
  EXPECT_TRUE(std::string(api->name()) == "HIP" || std::string(api->name()) == "CUDA") << api->name();
  // Host memory is not device memory; an unknown address is taken as host memory.
  int onStack = 0;
  auto host = api->isDevicePointer(&onStack);
  ASSERT_TRUE(host.ok()) << api->lastError();
  EXPECT_FALSE(host.value());
}

}  // namespace
}  // namespace tempo::mem
