// The CUDA runtime API subset, executed on the host. Streams are synchronous:
// every operation has completed when its call returns. Implemented in
// src/api.cpp; the templates of the C++ API (symbols, kernels) are here.
#pragma once

// ---- device management ----
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaInitDevice(int device, unsigned int deviceFlags = 0, unsigned int flags = 0);
cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
#define cudaGetDeviceProperties_v2 cudaGetDeviceProperties
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaThreadSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaThreadExit();
cudaError_t cudaSetDeviceFlags(unsigned int flags);
cudaError_t cudaGetDeviceFlags(unsigned int* flags);
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache config);
cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* config);
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig config);
cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* config);
cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value);
cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit);
cudaError_t cudaDeviceCanAccessPeer(int* canAccess, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peerDevice);
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaProfilerStart();
cudaError_t cudaProfilerStop();

// ---- errors ----
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);

// ---- memory ----
cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags = cudaMemAttachGlobal);
cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height);
cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent);
cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr);
cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, int dstDevice, cudaStream_t stream = 0);
cudaError_t cudaMemAdvise(const void* devPtr, size_t count, int advice, int device);

template <class T>
static inline cudaError_t cudaMalloc(T** devPtr, size_t size) {
  return cudaMalloc((void**)(void*)devPtr, size);
}
template <class T>
static inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
  return cudaMallocHost((void**)(void*)ptr, size);
}
template <class T>
static inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
  return cudaHostAlloc((void**)(void*)ptr, size, flags);
}
template <class T>
static inline cudaError_t cudaMallocManaged(T** devPtr, size_t size, unsigned int flags = cudaMemAttachGlobal) {
  return cudaMallocManaged((void**)(void*)devPtr, size, flags);
}
template <class T>
static inline cudaError_t cudaMallocPitch(T** devPtr, size_t* pitch, size_t width, size_t height) {
  return cudaMallocPitch((void**)(void*)devPtr, pitch, width, height);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** devPtr, size_t size, cudaStream_t stream) {
  return cudaMallocAsync((void**)(void*)devPtr, size, stream);
}
template <class T>
static inline cudaError_t cudaHostGetDevicePointer(T** pDevice, void* pHost, unsigned int flags) {
  return cudaHostGetDevicePointer((void**)(void*)pDevice, pHost, flags);
}

// ---- copies ----
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms* p);
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t stream = 0);
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count);
cudaError_t cudaMemset(void* devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream = 0);
cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream = 0);
cudaError_t cudaMemset3D(cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent);

namespace cuset {
namespace rt {
cudaError_t memcpy_symbol(void* symbol, size_t symbol_size, const void* src, size_t count, size_t offset, bool to_symbol,
                          cudaMemcpyKind kind);
void register_symbol(const void* symbol, size_t size);
}  // namespace rt
}  // namespace cuset

// __constant__ / __device__ variables are host globals here; the C++ API
// passes them by reference, which gives their address and size.
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                             cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  cuset::rt::flush_device_output();  // blocking: a GPU prints the kernels' output here
  return cuset::rt::memcpy_symbol((void*)&symbol, sizeof(T), src, count, offset, true, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                                  cudaMemcpyKind kind = cudaMemcpyHostToDevice,
                                                  cudaStream_t stream = 0) {
  (void)stream;
  return cuset::rt::memcpy_symbol((void*)&symbol, sizeof(T), src, count, offset, true, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                               cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  cuset::rt::flush_device_output();  // blocking: a GPU prints the kernels' output here
  return cuset::rt::memcpy_symbol((void*)&symbol, sizeof(T), dst, count, offset, false, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                                    cudaMemcpyKind kind = cudaMemcpyDeviceToHost,
                                                    cudaStream_t stream = 0) {
  (void)stream;
  return cuset::rt::memcpy_symbol((void*)&symbol, sizeof(T), dst, count, offset, false, kind);
}
template <class T>
static inline cudaError_t cudaGetSymbolAddress(void** devPtr, const T& symbol) {
  cuset::rt::register_symbol((const void*)&symbol, sizeof(T));
  *devPtr = (void*)&symbol;
  return cudaSuccess;
}
template <class U, class T>
static inline cudaError_t cudaGetSymbolAddress(U** devPtr, const T& symbol) {
  return cudaGetSymbolAddress((void**)(void*)devPtr, symbol);
}
template <class T>
static inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
  (void)symbol;
  *size = sizeof(T);
  return cudaSuccess;
}

// ---- streams and events (synchronous) ----
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority);
cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData);
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream = 0, unsigned int flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

// ---- kernels: attributes, occupancy ----
namespace cuset {
namespace rt {
cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t func_get_attributes(cudaFuncAttributes* attr, const void* func);
cudaError_t occupancy_blocks(int* numBlocks, int blockSize, size_t dynamicSMemSize);
}  // namespace rt
}  // namespace cuset

template <class T>
static inline cudaError_t cudaFuncSetAttribute(T* func, cudaFuncAttribute attr, int value) {
  return cuset::rt::func_set_attribute((const void*)func, attr, value);
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* func) {
  return cuset::rt::func_get_attributes(attr, (const void*)func);
}
template <class T>
static inline cudaError_t cudaFuncSetCacheConfig(T* func, cudaFuncCache config) {
  (void)func;
  (void)config;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaFuncSetSharedMemConfig(T* func, cudaSharedMemConfig config) {
  (void)func;
  (void)config;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, T* func, int blockSize,
                                                                        size_t dynamicSMemSize) {
  (void)func;
  return cuset::rt::occupancy_blocks(numBlocks, blockSize, dynamicSMemSize);
}
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, T* func,
                                                                                 int blockSize,
                                                                                 size_t dynamicSMemSize,
                                                                                 unsigned int flags) {
  (void)flags;
  (void)func;
  return cuset::rt::occupancy_blocks(numBlocks, blockSize, dynamicSMemSize);
}
template <class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, T func,
                                                             size_t dynamicSMemSize = 0, int blockSizeLimit = 0) {
  (void)func;
  (void)dynamicSMemSize;
  int b = 1024;
  if (blockSizeLimit > 0 && blockSizeLimit < b) b = blockSizeLimit;
  *blockSize = b;
  int per_sm = 1536 / b;
  if (per_sm < 1) per_sm = 1;
  *minGridSize = 128 * per_sm;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, T func, int numBlocks,
                                                                    int blockSize) {
  (void)func;
  (void)blockSize;
  if (numBlocks < 1) numBlocks = 1;
  size_t per = 102400 / (size_t)numBlocks;
  *dynamicSmemSize = per > 101376 ? 101376 : per;
  return cudaSuccess;
}

// ---- textures, surfaces and arrays ----
cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, cudaChannelFormatKind f);
cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height = 0,
                            unsigned int flags = 0);
cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                              unsigned int flags = 0);
cudaError_t cudaFreeArray(cudaArray_t array);
cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent, unsigned int* flags, cudaArray_t array);
cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                size_t width, size_t height, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                     size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
                                     cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                  size_t width, size_t height, cudaMemcpyKind kind);
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                              cudaMemcpyKind kind);
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                cudaMemcpyKind kind);
cudaError_t cudaCreateTextureObject(cudaTextureObject_t* texObject, const cudaResourceDesc* resDesc,
                                    const cudaTextureDesc* texDesc, const cudaResourceViewDesc* viewDesc);
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject);
cudaError_t cudaGetTextureObjectResourceDesc(cudaResourceDesc* resDesc, cudaTextureObject_t texObject);
cudaError_t cudaGetTextureObjectTextureDesc(cudaTextureDesc* texDesc, cudaTextureObject_t texObject);
cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* surfObject, const cudaResourceDesc* resDesc);
cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject);
