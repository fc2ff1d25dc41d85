/* Links against the installed library through roc::rccl, then runs one all-reduce on a
 * single-rank communicator: prints the library version and exits 0 on success. Tempo's
 * extension header is installed too: a single rank has no skew telemetry, which
 * tempoCommGetSkewStats reports as ncclInvalidUsage. */
#include <stdio.h>
#include <rccl/rccl.h>
#include <tempo/tempo.h>

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 1;
  ncclComm_t comm;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) return 2;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  if (ncclAllReduce(x, y, 4, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) return 3;
  tempoSkewStats_t stats;
  if (tempoCommGetSkewStats(comm, &stats, NULL) != ncclInvalidUsage) return 6;
  if (ncclCommDestroy(comm) != ncclSuccess) return 4;
  if (y[3] != 4.0f) return 5;
  printf("consumer: version %d, all-reduce ok\n", version);
  return 0;
}
