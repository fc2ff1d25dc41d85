/*
 * A C program written for NCCL: it includes <nccl.h> (the CUDA build's generated header, with
 * CUDA's cudaStream_t), links -lnccl and loads libnccl.so.2 at run time, as a program built
 * against NVIDIA's NCCL does. It checks the version it was compiled against, then runs an
 * all-reduce, an all-gather and a broadcast on host memory over two ranks of one process
 * (ncclCommInitAll, one group), with the NULL cudaStream_t, and checks every element.
 * Prints one line and exits 0 on success; anything else is a failure.
 */
#include <nccl.h>
#include <stdio.h>

#define N 7

static int check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    fprintf(stderr, "nccl_abi_run: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(NULL));
    return 1;
  }
  return 0;
}

int main(void) {
  int version = 0, r, i;
  ncclComm_t comms[2];
  float in[2][N], sum[2][N], gathered[2][2 * N], bcast[2][N];
  cudaStream_t stream = NULL;

  if (check(ncclGetVersion(&version), "ncclGetVersion")) return 1;
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "nccl_abi_run: library reports %d, header %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  if (check(ncclCommInitAll(comms, 2, NULL), "ncclCommInitAll")) return 1;
  for (r = 0; r < 2; ++r) {
    for (i = 0; i < N; ++i) in[r][i] = (float)(10 * r + i);
  }
  if (check(ncclGroupStart(), "ncclGroupStart")) return 1;
  for (r = 0; r < 2; ++r) {
    if (check(ncclAllReduce(in[r], sum[r], N, ncclFloat, ncclSum, comms[r], stream), "ncclAllReduce") ||
        check(ncclAllGather(in[r], gathered[r], N, ncclFloat, comms[r], stream), "ncclAllGather") ||
        check(ncclBroadcast(in[r], bcast[r], N, ncclFloat, 1, comms[r], stream), "ncclBroadcast")) {
      return 1;
    }
  }
  if (check(ncclGroupEnd(), "ncclGroupEnd")) return 1;
  for (r = 0; r < 2; ++r) {
    for (i = 0; i < N; ++i) {
      if (sum[r][i] != in[0][i] + in[1][i] || gathered[r][i] != in[0][i] ||
          gathered[r][N + i] != in[1][i] || bcast[r][i] != in[1][i]) {
        fprintf(stderr, "nccl_abi_run: rank %d element %d wrong\n", r, i);
        return 1;
      }
    }
  }
  for (r = 0; r < 2; ++r) {
    if (check(ncclCommDestroy(comms[r]), "ncclCommDestroy")) return 1;
  }
  printf("nccl_abi_run: libnccl.so.2 reports %d; all-reduce, all-gather and broadcast exact\n", version);
  return 0;
}
