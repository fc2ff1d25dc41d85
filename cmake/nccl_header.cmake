# Writes the NCCL-ABI header of the CUDA build (libnccl.so.2) from the one public header:
#   cmake -DIN=include/rccl/rccl.h -DOUT=<dir>/nccl.h -P cmake/nccl_header.cmake
# The declarations are rccl/rccl.h's with cudaStream_t for hipStream_t, and CUDA's runtime
# header where RCCL's has HIP's, which is what <nccl.h> is for NCCL programs. Both stream
# types are pointers to an opaque struct, so the machine-level ABI is the same library.
file(READ ${IN} text)
set(hip_block_re "#if defined\\(__HIPCC__\\)[^\n]*\n([^#]|#[^e]|#e[^n]|#en[^d])*#endif[^\n]*\n")
string(REGEX MATCH "${hip_block_re}" hip_block "${text}")
if(NOT hip_block MATCHES "hipStream_t")
  message(FATAL_ERROR "nccl_header.cmake: the HIP include block was not found in ${IN}")
endif()
string(REPLACE "${hip_block}" "#include <cuda_runtime.h>\n" text "${text}")
# rccl/rccl.h's paragraph on the stream type, then every use of it.
string(REGEX REPLACE " \\* This is plain C \\(C99 or later\\)[^\n]*\n( \\*[^\n]*\n)*[^\n]*same either way\\.\n"
       " * This is plain C (C11 or later) and C++; the stream type is CUDA's cudaStream_t.\n"
       text "${text}")
if(text MATCHES "HIP's own type")
  message(FATAL_ERROR "nccl_header.cmake: the stream-type paragraph was not found in ${IN}")
endif()
string(REPLACE "hipStream_t" "cudaStream_t" text "${text}")
string(REPLACE " * rccl/rccl.h -- the public API of Tempo's librccl.so.1."
               " * nccl.h -- the public API of Tempo's libnccl.so.2, its CUDA build. Generated from\n * rccl/rccl.h (cmake/nccl_header.cmake): the same API with cudaStream_t for hipStream_t;\n * what follows is rccl/rccl.h's own description."
               text "${text}")
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
