#include "src/mem/device_api.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::mem {
namespace {

std::atomic<DeviceApi*> g_api{nullptr};
std::atomic<bool> g_decided{false};  // set once g_api holds the process's choice
std::once_flag g_loaded;

// The directory this library (or executable) was loaded from, with a trailing '/'.
std::string ownDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&deviceApi), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

DeviceApi* loadPlugin(const std::string& path) {
  // RTLD_LOCAL: the plugin's copy of the runtime and of Tempo's core stay its own.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    TEMPO_INFO(log::Init, "GPU: no device buffers: cannot load %s: %s", path.c_str(), dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<GpuPluginEntry>(dlsym(handle, kGpuPluginEntry));
  if (!entry) {
    TEMPO_INFO(log::Init, "GPU: no device buffers: %s has no %s", path.c_str(), kGpuPluginEntry);
    dlclose(handle);
    return nullptr;
  }
  char why[256] = "";
  DeviceApi* api = entry(why, sizeof why);
  if (!api) {
    TEMPO_INFO(log::Init, "GPU: no device buffers: %s: %s", path.c_str(), why);
    dlclose(handle);
    return nullptr;
  }
  // Kept loaded for the life of the process: the runtime it holds may not unload cleanly.
  TEMPO_INFO(log::Init, "GPU: device buffers through %s (%s)", api->name(), path.c_str());
  return api;
}

}  // namespace

DeviceApi* loadDeviceApi(const std::string& choice, const std::string& pluginDirectory) {
  if (choice == "off") {
    TEMPO_INFO(log::Init, "GPU: host memory only (TEMPO_GPU=off)");
    return nullptr;
  }
  if (choice != "auto") return loadPlugin(choice);
  const std::string dir = pluginDirectory.empty() ? ownDirectory() : pluginDirectory;
  if (access("/dev/kfd", F_OK) == 0) return loadPlugin(dir + "libtempo-gpu-hip.so");
  if (access("/dev/nvidiactl", F_OK) == 0) return loadPlugin(dir + "libtempo-gpu-cuda.so");
  TEMPO_INFO(log::Init, "GPU: host memory only (no /dev/kfd or /dev/nvidiactl)");
  return nullptr;
}

Status deviceCall(const DeviceApi& api, Status s) {
  if (!ok(s)) setLastErrorMessage(api.lastError());
  return s;
}

DeviceApi* deviceApi() {
  if (!g_decided.load(std::memory_order_acquire)) {
    std::call_once(g_loaded, [] {
      g_api.store(loadDeviceApi(param::Gpu()), std::memory_order_release);
      g_decided.store(true, std::memory_order_release);
    });
  }
  return g_api.load(std::memory_order_acquire);
}

DeviceApi* setDeviceApiForTesting(DeviceApi* api) {
  // The test's choice replaces any loading.
  std::call_once(g_loaded, [] { g_decided.store(true, std::memory_order_release); });
  return g_api.exchange(api, std::memory_order_acq_rel);
}

}  // namespace tempo::mem
