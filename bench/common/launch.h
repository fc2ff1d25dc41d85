// How a perf tool's process was started, and the cross-process operations that do not go
// through the library.
//
// Order of detection (detectLaunch):
//  1. MPI, when the tool was built with MPI (TEMPO_BENCH_HAVE_MPI) and launched by an MPI
//     launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set), unless
//     TEMPO_BENCH_LAUNCH=env; TEMPO_BENCH_LAUNCH=mpi forces MPI (singleton without mpirun).
//     Rank 0 creates the unique id and MPI_Bcast's it, as rccl-tests.
//  2. Environment: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, else SLURM_PROCID/NTASKS/LOCALID,
//     else RANK/WORLD_SIZE/LOCAL_RANK (tools/tempo-run, torchrun). With more than one
//     process, NCCL_COMM_ID=MASTER_ADDR:MASTER_PORT is put in this process's environment
//     (unless NCCL_COMM_ID is already set), so every rank computes the same unique id
//     locally. MASTER_ADDR defaults to 127.0.0.1; MASTER_PORT to a port derived from the
//     job id (OMPI_MCA_ess_base_jobid, or SLURM_JOB_ID and SLURM_STEP_ID), else 29500.
//  3. Otherwise a single process.
// detectLaunch must run before the first library call: the library reads NCCL_COMM_ID once.
//
// The mpi* functions may only be called in Mpi mode, from the thread that called
// detectLaunch (MPI is initialised with MPI_THREAD_FUNNELED).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tempo::bench {

struct Launch {
  enum Kind { Single, Mpi, Env } kind = Single;
  int nprocs = 1;
  int proc = 0;
  int localRank = 0;
  std::string source;  // how the rank was found, for messages
};

// Returns false (after printing why to stderr) when the environment is inconsistent.
bool detectLaunch(int* argc, char*** argv, Launch* out);
void finishLaunch(const Launch& l);  // MPI_Finalize in Mpi mode
// Ends the whole job: MPI_Abort in Mpi mode, else _exit(code) after flushing stdio.
[[noreturn]] void abortJob(int code);

// Cross-process operations (Mpi mode only).
enum class Reduce { Rank0 = 0, Avg = 1, Min = 2, Max = 3, Sum = 4 };  // nccl-tests' numbering
void mpiBcastBytes(void* data, size_t bytes);
void mpiBarrier();
double mpiReduceDouble(double v, Reduce op);  // Avg returns the sum; the caller divides
int64_t mpiSum(int64_t v);
// Every process passes its text; process 0 gets all of them in rank order, others {}.
std::vector<std::string> mpiGatherText(const std::string& mine);
// The MPI library's version string (first line), "" without MPI.
std::string mpiLibraryVersion();

}  // namespace tempo::bench
