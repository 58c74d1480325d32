// CUDA arrays, texture objects and surface objects.
#include "cuset_cpu.h"
#include "internal.h"

#include <cmath>
#include <vector>

struct cudaArray {
  cudaChannelFormatDesc desc;
  size_t width, height, depth;  // elements; height/depth 0 when unused
  unsigned flags;
  size_t elem;                  // bytes per element
  unsigned char* data;
  bool live;
};

namespace cuset {
namespace rt {

static int channels_of(const cudaChannelFormatDesc& d) { return (d.x > 0) + (d.y > 0) + (d.z > 0) + (d.w > 0); }

static bool valid_desc(const cudaChannelFormatDesc& d) {
  int n = channels_of(d);
  if (n == 0 || n == 3) return false;  // CUDA arrays have 1, 2 or 4 channels
  int bits[4] = {d.x, d.y, d.z, d.w};
  for (int i = 0; i < n; ++i)
    if (bits[i] != d.x) return false;
  if (d.f == cudaChannelFormatKindFloat) return d.x == 16 || d.x == 32;
  if (d.f == cudaChannelFormatKindSigned || d.f == cudaChannelFormatKindUnsigned)
    return d.x == 8 || d.x == 16 || d.x == 32;
  return false;
}

static size_t elem_bytes(const cudaChannelFormatDesc& d) { return (size_t)(d.x + d.y + d.z + d.w) / 8; }

// One texel channel as a double (raw element value, no normalisation).
static double read_channel(const unsigned char* p, const cudaChannelFormatDesc& d, int ch) {
  size_t bytes = (size_t)d.x / 8;
  const unsigned char* q = p + bytes * (size_t)ch;
  switch (d.f) {
    case cudaChannelFormatKindFloat:
      if (d.x == 16) {
        unsigned short b;
        memcpy(&b, q, 2);
        return f16_value(b);
      } else {
        float f;
        memcpy(&f, q, 4);
        return f;
      }
    case cudaChannelFormatKindSigned:
      if (d.x == 8) return (double)*(const signed char*)q;
      if (d.x == 16) {
        short s;
        memcpy(&s, q, 2);
        return s;
      } else {
        int i;
        memcpy(&i, q, 4);
        return i;
      }
    default:
      if (d.x == 8) return (double)*q;
      if (d.x == 16) {
        unsigned short s;
        memcpy(&s, q, 2);
        return s;
      } else {
        unsigned i;
        memcpy(&i, q, 4);
        return i;
      }
  }
}

struct TexObject {
  bool live;
  cudaResourceDesc res;
  cudaTextureDesc tex;
  cudaChannelFormatDesc desc;
  const unsigned char* data;
  size_t width, height, depth, layers;  // in elements; layers 0 if not layered
  size_t pitch;                         // row bytes
  size_t slice;                         // bytes per 2D slice (or per layer)
  size_t elem;
  bool normalize_read;                  // cudaReadModeNormalizedFloat on 8/16-bit integers
};

static std::vector<TexObject>& textures() {
  static std::vector<TexObject> t;
  return t;
}

static TexObject& texture_of(cudaTextureObject_t obj, const char* api) {
  auto& t = textures();
  if (obj == 0 || obj > t.size() || !t[obj - 1].live)
    fatal(Fatal::runtime_error, "%s on an invalid or destroyed texture object %llu", api, (unsigned long long)obj);
  return t[obj - 1];
}

static double normalized(double v, const cudaChannelFormatDesc& d) {
  if (d.f == cudaChannelFormatKindUnsigned) return v / (double)((1ull << d.x) - 1);
  double r = v / (double)((1ull << (d.x - 1)) - 1);
  return r < -1.0 ? -1.0 : r;
}

static void texel(const TexObject& t, long long i, long long j, long long k, long long layer, TexSample& s) {
  const unsigned char* p = t.data + (size_t)i * t.elem + (size_t)j * t.pitch + (size_t)k * t.slice;
  if (layer >= 0) p += (size_t)layer * t.slice;
  int n = channels_of(t.desc);
  for (int c = 0; c < 4; ++c) {
    double v = c < n ? read_channel(p, t.desc, c) : (c == 3 ? 1.0 : 0.0);
    if (t.normalize_read) v = normalized(v, t.desc);
    s.v[c] = v;
  }
}

// Maps an integer texel index to a valid one, or -1 for the border.
static long long address(long long i, long long n, cudaTextureAddressMode mode, bool normalized_coords) {
  if (i >= 0 && i < n) return i;
  if (!normalized_coords && (mode == cudaAddressModeWrap || mode == cudaAddressModeMirror))
    mode = cudaAddressModeClamp;  // wrap and mirror need normalised coordinates
  switch (mode) {
    case cudaAddressModeWrap: return ((i % n) + n) % n;
    case cudaAddressModeMirror: {
      long long m = ((i % (2 * n)) + 2 * n) % (2 * n);
      return m < n ? m : 2 * n - 1 - m;
    }
    case cudaAddressModeBorder: return -1;
    default: return i < 0 ? 0 : n - 1;
  }
}

static void sample(const TexObject& t, int dims, const long long* idx, long long layer, TexSample& s) {
  long long sizes[3] = {(long long)t.width, (long long)(t.height ? t.height : 1), (long long)(t.depth ? t.depth : 1)};
  long long a[3] = {0, 0, 0};
  for (int d = 0; d < dims; ++d) {
    a[d] = address(idx[d], sizes[d], t.tex.addressMode[d], t.tex.normalizedCoords != 0);
    if (a[d] < 0) {
      for (int c = 0; c < 4; ++c) s.v[c] = t.tex.borderColor[c];
      return;
    }
  }
  texel(t, a[0], a[1], a[2], layer, s);
}

void tex_fetch(cudaTextureObject_t obj, int dims, float x, float y, float z, int layer, TexSample& out,
               const char* api) {
  const TexObject& t = texture_of(obj, api);
  double c[3] = {x, y, z};
  long long sizes[3] = {(long long)t.width, (long long)(t.height ? t.height : 1), (long long)(t.depth ? t.depth : 1)};
  if (t.tex.normalizedCoords)
    for (int d = 0; d < dims; ++d) c[d] *= (double)sizes[d];
  long long lay = -1;
  if (layer >= 0) lay = layer < (long long)t.layers ? layer : (long long)t.layers - 1;
  if (t.tex.filterMode == cudaFilterModePoint) {
    long long idx[3];
    for (int d = 0; d < dims; ++d) idx[d] = (long long)floor((float)c[d]);
    sample(t, dims, idx, lay, out);
    return;
  }
  // Linear: weights of the 2^dims neighbours, fractions in 1.8 fixed point.
  long long base[3];
  double frac[3];
  for (int d = 0; d < dims; ++d) {
    double b = (float)c[d] - 0.5f;
    base[d] = (long long)floor(b);
    frac[d] = round((b - (double)base[d]) * 256.0) / 256.0;
  }
  for (int ch = 0; ch < 4; ++ch) out.v[ch] = 0.0;
  for (int corner = 0; corner < (1 << dims); ++corner) {
    long long idx[3];
    double w = 1.0;
    for (int d = 0; d < dims; ++d) {
      int bit = (corner >> d) & 1;
      idx[d] = base[d] + bit;
      w *= bit ? frac[d] : 1.0 - frac[d];
    }
    if (w == 0.0) continue;
    TexSample s;
    sample(t, dims, idx, lay, s);
    for (int ch = 0; ch < 4; ++ch) out.v[ch] += w * s.v[ch];
  }
  for (int ch = 0; ch < 4; ++ch) out.v[ch] = (float)out.v[ch];
}

void tex_fetch_index(cudaTextureObject_t obj, int index, TexSample& out) {
  const TexObject& t = texture_of(obj, "tex1Dfetch");
  if (t.res.resType != cudaResourceTypeLinear)
    fatal(Fatal::runtime_error, "tex1Dfetch on a texture that is not bound to linear memory");
  if (index < 0 || (size_t)index >= t.width) {  // out of range reads zero
    for (int c = 0; c < 4; ++c) out.v[c] = 0.0;
    return;
  }
  texel(t, index, 0, 0, -1, out);
}

// ---------------------------------------------------------------- surfaces
struct SurfObject {
  bool live;
  cudaArray_t array;
};
static std::vector<SurfObject>& surfaces() {
  static std::vector<SurfObject> s;
  return s;
}

void surf_access(cudaSurfaceObject_t obj, int dims, int x_bytes, int y, int z, int layer, void* data, unsigned size,
                 bool write, int boundary_mode, const char* api) {
  auto& ss = surfaces();
  if (obj == 0 || obj > ss.size() || !ss[obj - 1].live)
    fatal(Fatal::runtime_error, "%s on an invalid or destroyed surface object %llu", api, (unsigned long long)obj);
  cudaArray_t a = ss[obj - 1].array;
  if (!a->live) fatal(Fatal::runtime_error, "%s on a surface whose cudaArray was freed", api);
  long long w = (long long)a->width, h = (long long)(a->height ? a->height : 1),
            d = (long long)(a->depth ? a->depth : 1);
  bool layered = (a->flags & cudaArrayLayered) != 0;
  if (layered && layer < 0) layer = 0;
  long long slices = layered ? d : 1;
  long long nd = layered ? 1 : d;
  if (x_bytes % (int)a->elem != 0 && boundary_mode == cudaBoundaryModeTrap)
    fatal(Fatal::runtime_error, "%s: x = %d bytes is not a multiple of the %zu-byte element (cudaErrorMisalignedAddress)",
          api, x_bytes, a->elem);
  long long i = x_bytes >= 0 ? x_bytes / (long long)a->elem : -1;
  long long c[3] = {i, dims > 1 ? y : 0, dims > 2 ? z : 0};
  long long n[3] = {w, dims > 1 ? h : 1, dims > 2 ? nd : 1};
  for (int k = 0; k < 3; ++k) {
    if (c[k] >= 0 && c[k] < n[k]) continue;
    if (boundary_mode == cudaBoundaryModeZero) {
      if (!write) memset(data, 0, size);
      return;
    }
    if (boundary_mode == cudaBoundaryModeClamp) {
      c[k] = c[k] < 0 ? 0 : n[k] - 1;
      continue;
    }
    fatal(Fatal::runtime_error, "%s out of range at (%d bytes, %d, %d) for a %lldx%lldx%lld array (cudaErrorIllegalAddress)",
          api, x_bytes, y, z, w, h, d);
  }
  if (layer >= slices) layer = (int)slices - 1;
  size_t row = a->width * a->elem;
  size_t offset = (size_t)c[0] * a->elem + (size_t)c[1] * row + (size_t)c[2] * row * (size_t)h +
                  (layered ? (size_t)layer * row * (size_t)h : 0);
  size_t total = row * (size_t)h * (size_t)d;
  if (offset + size > total) fatal(Fatal::runtime_error, "%s: %u-byte access past the end of the array", api, size);
  if (write)
    memcpy(a->data + offset, data, size);
  else
    memcpy(data, a->data + offset, size);
}

}  // namespace rt
}  // namespace cuset

using namespace cuset::rt;

cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

static cudaError_t new_array(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t w, size_t h, size_t d,
                             unsigned flags) {
  if (!array || !desc || w == 0) return cudaErrorInvalidValue;
  if (!valid_desc(*desc)) return cudaErrorInvalidChannelDescriptor;
  cudaArray* a = new cudaArray{};
  a->desc = *desc;
  a->width = w;
  a->height = h;
  a->depth = d;
  a->flags = flags;
  a->elem = elem_bytes(*desc);
  size_t bytes = w * (h ? h : 1) * (d ? d : 1) * a->elem;
  a->data = (unsigned char*)calloc(bytes ? bytes : 1, 1);
  if (!a->data) {
    delete a;
    return cudaErrorMemoryAllocation;
  }
  a->live = true;
  *array = a;
  return cudaSuccess;
}

cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int flags) {
  cudaError_t e = new_array(array, desc, width, height, 0, flags);
  if (e != cudaSuccess) set_last_error(e);
  return e;
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                              unsigned int flags) {
  cudaError_t e = new_array(array, desc, extent.width, extent.height, extent.depth, flags);
  if (e != cudaSuccess) set_last_error(e);
  return e;
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  if (!array) return cudaSuccess;
  if (!array->live) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  array->live = false;
  free(array->data);
  array->data = nullptr;
  return cudaSuccess;
}

cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent, unsigned int* flags, cudaArray_t a) {
  if (!a || !a->live) return cudaErrorInvalidValue;
  if (desc) *desc = a->desc;
  if (extent) *extent = make_cudaExtent(a->width, a->height, a->depth);
  if (flags) *flags = a->flags;
  return cudaSuccess;
}

static cudaError_t array_rows(cudaArray_t a, size_t wOffset, size_t hOffset, size_t width, size_t height) {
  if (!a || !a->live) return cudaErrorInvalidValue;
  size_t row = a->width * a->elem;
  size_t rows = (a->height ? a->height : 1) * (a->depth ? a->depth : 1);
  if (wOffset + width > row || hOffset + height > rows) return cudaErrorInvalidValue;
  return cudaSuccess;
}

static cudaError_t copy_2d_to_array(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                    size_t width, size_t height, cudaMemcpyKind kind) {
  (void)kind;
  cudaError_t e = array_rows(dst, wOffset, hOffset, width, height);
  if (e == cudaSuccess && width > spitch) e = cudaErrorInvalidPitchValue;
  if (e != cudaSuccess) {
    set_last_error(e);
    return e;
  }
  size_t row = dst->width * dst->elem;
  device_access_begin();
  for (size_t r = 0; r < height; ++r)
    memcpy(dst->data + (hOffset + r) * row + wOffset, (const unsigned char*)src + r * spitch, width);
  device_access_end();
  return cudaSuccess;
}

// The blocking copies print the device printf output held back (device_printf.cpp).
cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                size_t width, size_t height, cudaMemcpyKind kind) {
  flush_device_output();
  return copy_2d_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind);
}

cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                     size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
  return copy_2d_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind);
}

cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                  size_t width, size_t height, cudaMemcpyKind kind) {
  (void)kind;
  flush_device_output();
  cudaError_t e = array_rows(const_cast<cudaArray_t>(src), wOffset, hOffset, width, height);
  if (e == cudaSuccess && width > dpitch) e = cudaErrorInvalidPitchValue;
  if (e != cudaSuccess) {
    set_last_error(e);
    return e;
  }
  size_t row = src->width * src->elem;
  device_access_begin();
  for (size_t r = 0; r < height; ++r)
    memcpy((unsigned char*)dst + r * dpitch, src->data + (hOffset + r) * row + wOffset, width);
  device_access_end();
  return cudaSuccess;
}

cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                              cudaMemcpyKind kind) {
  flush_device_output();
  if (!dst || !dst->live) return cudaErrorInvalidValue;
  size_t row = dst->width * dst->elem;
  size_t start = hOffset * row + wOffset;
  size_t total = row * (dst->height ? dst->height : 1) * (dst->depth ? dst->depth : 1);
  if (start + count > total) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  (void)kind;
  device_access_begin();
  memcpy(dst->data + start, src, count);
  device_access_end();
  return cudaSuccess;
}

cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                cudaMemcpyKind kind) {
  flush_device_output();
  if (!src || !src->live) return cudaErrorInvalidValue;
  size_t row = src->width * src->elem;
  size_t start = hOffset * row + wOffset;
  size_t total = row * (src->height ? src->height : 1) * (src->depth ? src->depth : 1);
  if (start + count > total) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  (void)kind;
  device_access_begin();
  memcpy(dst, src->data + start, count);
  device_access_end();
  return cudaSuccess;
}

static cudaError_t copy_3d(const cudaMemcpy3DParms* p) {
  if (!p) return cudaErrorInvalidValue;
  const cudaExtent& e = p->extent;
  // Extent is in elements when an array is involved, else in bytes.
  cudaArray_t arr = p->srcArray ? p->srcArray : p->dstArray;
  size_t elem = arr ? arr->elem : 1;
  size_t width_bytes = e.width * elem;
  auto locate = [&](cudaArray_t a, const cudaPitchedPtr& pp, const cudaPos& pos, size_t y, size_t z) -> unsigned char* {
    if (a) {
      size_t row = a->width * a->elem;
      size_t h = a->height ? a->height : 1;
      return a->data + (pos.z + z) * row * h + (pos.y + y) * row + pos.x * a->elem;
    }
    size_t ysize = pp.ysize ? pp.ysize : e.height;
    return (unsigned char*)pp.ptr + (pos.z + z) * pp.pitch * ysize + (pos.y + y) * pp.pitch + pos.x;
  };
  device_access_begin();
  for (size_t z = 0; z < (e.depth ? e.depth : 1); ++z)
    for (size_t y = 0; y < (e.height ? e.height : 1); ++y)
      memcpy(locate(p->dstArray, p->dstPtr, p->dstPos, y, z), locate(p->srcArray, p->srcPtr, p->srcPos, y, z),
             width_bytes);
  device_access_end();
  return cudaSuccess;
}

cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms* p) {
  flush_device_output();
  return copy_3d(p);
}
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t) { return copy_3d(p); }

cudaError_t cudaCreateTextureObject(cudaTextureObject_t* out, const cudaResourceDesc* res, const cudaTextureDesc* tex,
                                    const cudaResourceViewDesc* view) {
  (void)view;
  if (!out || !res || !tex) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  TexObject t{};
  t.live = true;
  t.res = *res;
  t.tex = *tex;
  switch (res->resType) {
    case cudaResourceTypeArray: {
      cudaArray_t a = res->res.array.array;
      if (!a || !a->live) {
        set_last_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
      }
      t.desc = a->desc;
      t.data = a->data;
      t.width = a->width;
      t.height = a->height;
      t.elem = a->elem;
      t.pitch = a->width * a->elem;
      if (a->flags & cudaArrayLayered) {
        // 1D layered: height holds the layers? CUDA uses depth for layers.
        t.layers = a->depth ? a->depth : 1;
        t.depth = 0;
        t.slice = t.pitch * (a->height ? a->height : 1);
      } else {
        t.depth = a->depth;
        t.slice = t.pitch * (a->height ? a->height : 1);
      }
      break;
    }
    case cudaResourceTypeLinear:
      t.desc = res->res.linear.desc;
      t.data = (const unsigned char*)res->res.linear.devPtr;
      t.elem = elem_bytes(t.desc);
      t.width = t.elem ? res->res.linear.sizeInBytes / t.elem : 0;
      t.pitch = res->res.linear.sizeInBytes;
      break;
    case cudaResourceTypePitch2D:
      t.desc = res->res.pitch2D.desc;
      t.data = (const unsigned char*)res->res.pitch2D.devPtr;
      t.elem = elem_bytes(t.desc);
      t.width = res->res.pitch2D.width;
      t.height = res->res.pitch2D.height;
      t.pitch = res->res.pitch2D.pitchInBytes;
      if (t.pitch < t.width * t.elem || t.pitch % 32 != 0) {
        set_last_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
      }
      break;
    default:
      fatal(Fatal::unsupported, "cudaCreateTextureObject with a mipmapped array");
  }
  if (!valid_desc(t.desc) || !t.data) {
    set_last_error(cudaErrorInvalidChannelDescriptor);
    return cudaErrorInvalidChannelDescriptor;
  }
  bool integer = t.desc.f != cudaChannelFormatKindFloat;
  t.normalize_read = integer && tex->readMode == cudaReadModeNormalizedFloat;
  if (t.normalize_read && t.desc.x == 32) {
    set_last_error(cudaErrorInvalidNormSetting);
    return cudaErrorInvalidNormSetting;
  }
  if (tex->filterMode == cudaFilterModeLinear && integer && !t.normalize_read) {
    set_last_error(cudaErrorInvalidFilterSetting);
    return cudaErrorInvalidFilterSetting;
  }
  textures().push_back(t);
  *out = textures().size();
  return cudaSuccess;
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t obj) {
  auto& t = textures();
  if (obj == 0) return cudaSuccess;
  if (obj > t.size() || !t[obj - 1].live) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  t[obj - 1].live = false;
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectResourceDesc(cudaResourceDesc* res, cudaTextureObject_t obj) {
  auto& t = textures();
  if (!res || obj == 0 || obj > t.size() || !t[obj - 1].live) return cudaErrorInvalidValue;
  *res = t[obj - 1].res;
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectTextureDesc(cudaTextureDesc* tex, cudaTextureObject_t obj) {
  auto& t = textures();
  if (!tex || obj == 0 || obj > t.size() || !t[obj - 1].live) return cudaErrorInvalidValue;
  *tex = t[obj - 1].tex;
  return cudaSuccess;
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* out, const cudaResourceDesc* res) {
  if (!out || !res || res->resType != cudaResourceTypeArray || !res->res.array.array ||
      !res->res.array.array->live) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  surfaces().push_back(SurfObject{true, res->res.array.array});
  *out = surfaces().size();
  return cudaSuccess;
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t obj) {
  auto& s = surfaces();
  if (obj == 0) return cudaSuccess;
  if (obj > s.size() || !s[obj - 1].live) {
    set_last_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  s[obj - 1].live = false;
  return cudaSuccess;
}
