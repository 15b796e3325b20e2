// Command kiln-backend-cuda is kiln's CUDA backend plugin (id "cuda"): it serves
// plugins/cuda/backend over the kiln plugin protocol. The host starts it; run by
// hand it prints a notice and exits. It builds and starts without CUDA: the driver
// library is opened at run time, and without it every adapter is unavailable with
// a reason.
//
// Environment: KILN_CUDA_DRIVER names another driver library than libcuda.so.1;
// KILN_LOG_LEVEL sets the log level.
package main
