/*
 * rccl.h -- for code that includes "rccl.h" rather than <rccl/rccl.h> (RCCL installs such a
 * wrapper for backward compatibility). Everything lives in rccl/rccl.h.
 */
#ifndef TEMPO_RCCL_WRAPPER_H_
#define TEMPO_RCCL_WRAPPER_H_

#include "rccl/rccl.h"

#endif /* TEMPO_RCCL_WRAPPER_H_ */
