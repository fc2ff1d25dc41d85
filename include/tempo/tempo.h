/*
 * Tempo's own extensions to the RCCL API: skew statistics and pacing control.
 *
 * Plain C, exported by librccl.so.1 next to the RCCL API (strong symbols, no pX twins).
 * A program that uses them links against Tempo only; RCCL has no such calls.
 *
 * Tempo measures skew on every collective inside its progress engine: a collective's
 * transfer time is the shortest duration across ranks (the last arriver's), and a rank's
 * lead is its duration minus that, i.e. how long it waited for the others. No clock
 * synchronisation is involved. Statistics are shared between the ranks by a small
 * exchange every window of collectives (TEMPO_PACING_WINDOW, at most TEMPO_PACING_HZ a
 * second); what the calls below report is as of the last window.
 */
#ifndef TEMPO_TEMPO_H_
#define TEMPO_TEMPO_H_

#include <rccl/rccl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  tempoPacingOff = 0,     /* no delays (the telemetry keeps running if it was on at init) */
  tempoPacingObserve = 1, /* measure and report only (the default) */
  tempoPacingOn = 2       /* also delay persistently early ranks when that pays */
} tempoPacingMode_t;

typedef enum {
  tempoControllerOff = 0,
  tempoControllerObserve = 1,
  tempoControllerPace = 2,
  tempoControllerCooldown = 3,
  tempoControllerDisabled = 4 /* pacing did not pay in its probes; retried later */
} tempoControllerState_t;

typedef struct {
  int nranks;
  tempoPacingMode_t mode;
  unsigned long long collectives;   /* collectives this rank finished on the communicator */
  unsigned long long windows;       /* telemetry exchanges so far */
  unsigned long long measured;      /* collectives whose skew was measured */
  unsigned int window;              /* collectives in the current window */
  /* Over about the last 256 measured collectives (microseconds). */
  double skewP50Us, skewP99Us;         /* latest minus earliest arrival, duration-based */
  double transferP50Us, transferP99Us; /* the last arriver's duration */
  double relativeSkew;                 /* median skew / median transfer, last window */
  /* Iterations, inferred from the repeating pattern of collectives (or the hint). */
  int iterationPeriod;                 /* collectives per iteration; 0 while unknown */
  int iterations;                      /* iterations in the figures below (the last <= 64) */
  double iterationMeanUs, iterationCoV, iterationP50Us, iterationP99Us;
  /* Who arrives last: normalised entropy (1 = every rank alike, 0 = always the same one). */
  double lastArriverEntropy;
  int topLastArriver;                  /* -1 while unknown */
  double topLastArriverShare;
  /* The pacing controller (the same state on every rank). */
  tempoControllerState_t state;
  double gain;
  int probing;                         /* the current window runs unpaced, to check pacing pays */
  int wouldPace;                       /* observe mode: pacing's conditions held last window */
  double delayCapUs;
  double delayUs;                      /* this rank's current delay per collective */
  double delayTotalUs;                 /* all delays this rank has applied */
  unsigned long long pacedCollectives;
} tempoSkewStats_t;

/* Fills *stats (required) and, when rankLeadUs is not NULL, rankLeadUs[r] for every rank r
 * of the communicator: rank r's average lead in microseconds (0 for a rank that is the
 * last arriver). ncclInvalidUsage when TEMPO_PACING was off at initialisation. */
ncclResult_t tempoCommGetSkewStats(ncclComm_t comm, tempoSkewStats_t* stats, float* rankLeadUs);

/* Changes this rank's pacing mode. Observe and on need the telemetry that TEMPO_PACING=off
 * leaves out at initialisation (ncclInvalidUsage then). Delays are local and bounded, so
 * ranks may differ in mode. */
ncclResult_t tempoCommSetPacing(ncclComm_t comm, tempoPacingMode_t mode);

/* Hint: the number of collectives per training iteration on this communicator, which
 * overrides the inferred one (0 returns to inference). */
ncclResult_t tempoCommSetIterationPeriod(ncclComm_t comm, int collectivesPerIteration);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif /* TEMPO_TEMPO_H_ */
