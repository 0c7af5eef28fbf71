#include "server/http/gzip.h"

namespace textgen {
namespace {

// 15 window bits + 16: a gzip header and trailer rather than zlib's.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kLevel = 6;

}  // namespace

std::optional<std::string> Gzip(absl::string_view body) {
  z_stream zs{};
  if (deflateInit2(&zs, kLevel, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&zs, body.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  zs.avail_in = static_cast<uInt>(body.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (result != Z_STREAM_END) return std::nullopt;
  return out;
}

GzipStream::GzipStream()
    : ok_(deflateInit2(&zs_, kLevel, Z_DEFLATED, kGzipWindowBits, 8,
                       Z_DEFAULT_STRATEGY) == Z_OK) {}

GzipStream::~GzipStream() {
  if (ok_) deflateEnd(&zs_);
}

std::string GzipStream::Compress(absl::string_view piece) {
  return Deflate(piece, Z_SYNC_FLUSH);
}

std::string GzipStream::Finish() { return Deflate({}, Z_FINISH); }

std::string GzipStream::Deflate(absl::string_view in, int flush) {
  std::string out;
  if (!ok_) return out;
  zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs_.avail_in = static_cast<uInt>(in.size());
  // Until deflate leaves room in the buffer: then all input is taken and
  // the flush is complete.
  do {
    const size_t at = out.size();
    out.resize(at + deflateBound(&zs_, in.size()) + 64);
    zs_.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    zs_.avail_out = static_cast<uInt>(out.size() - at);
    const int result = deflate(&zs_, flush);
    out.resize(out.size() - zs_.avail_out);
    if (result == Z_STREAM_ERROR) {
      ok_ = false;
      return std::string();
    }
  } while (zs_.avail_out == 0);
  return out;
}

}  // namespace textgen
