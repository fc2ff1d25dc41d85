// The one portability layer between HIP and CUDA for Tempo's device kernels.
//
// kernels/hip/*.hip is written once against the names below and compiled by hipcc for AMD
// GPUs and by nvcc (as CUDA) for NVIDIA GPUs, so the same kernels can be tested on either.
// The mapping is deliberately small: the qualifiers, the runtime calls the launchers make
// (TEMPO_GPU(Name) is hipName or cudaName, with identical signatures in the subset used),
// and the types they take.
//
// Compiled by a host-only compiler (g++ for the unit tests), only TEMPO_HD is defined, as
// nothing: the element operations in element.h then compile as ordinary host functions,
// which is how the CPU-only build checks the device arithmetic bit for bit against the
// reference reducers.
#pragma once

#if defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#define TEMPO_GPU_HIP 1
#define TEMPO_GPU_BACKEND "HIP"
#define TEMPO_GPU(name) hip##name
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuDeviceProp_t = hipDeviceProp_t;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr auto gpuMemcpyDefault = hipMemcpyDefault;
inline constexpr auto gpuAttrMultiprocessorCount = hipDeviceAttributeMultiprocessorCount;
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define TEMPO_GPU_CUDA 1
#define TEMPO_GPU_BACKEND "CUDA"
#define TEMPO_GPU(name) cuda##name
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuDeviceProp_t = cudaDeviceProp;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr auto gpuMemcpyDefault = cudaMemcpyDefault;
inline constexpr auto gpuAttrMultiprocessorCount = cudaDevAttrMultiProcessorCount;
#endif

// A function callable from both host and device code.
#if defined(TEMPO_GPU_HIP) || defined(TEMPO_GPU_CUDA)
#define TEMPO_HD __host__ __device__
#else
#define TEMPO_HD
#endif
