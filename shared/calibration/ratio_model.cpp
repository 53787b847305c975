// shared/calibration/ratio_model.cpp — see ratio_model.h.
#include "calibration/ratio_model.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "codec/codec.h"
#include "io/tensor_file.h"

namespace compcoll::calib {

MeasuredRatio measure_ratio(const std::string& codec_name, DType dtype, const std::string& dir, const std::string& kind) {
  namespace fs = std::filesystem;
  const Codec* codec = find_codec(codec_name);
  if (!codec) throw std::runtime_error("unknown codec '" + codec_name + "'");
  const std::string prefix = kind + ".", suffix = "." + std::string(dtype_name(dtype)) + ".npy";
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix))
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw std::runtime_error(dir + ": no tensor file " + prefix + "*" + suffix + " to measure the " + codec_name +
                             " ratio of " + kind + " tensors");
  MeasuredRatio m;
  uint64_t payload = 0;
  for (const auto& f : files) {
    for (const auto& t : load_tensors(f, dtype)) {
      const auto stream = encode(*codec, dtype, t.bytes.data(), t.elements());
      payload += read_stream_info(stream.data(), stream.size()).payload_bytes;
      m.bytes += t.bytes.size();
    }
    ++m.files;
  }
  m.ratio = m.bytes ? static_cast<double>(payload) / static_cast<double>(m.bytes) : 1.0;
  m.source = "measured on " + std::to_string(m.files) + " files " + dir + "/" + prefix + "*" + suffix + " (" +
             std::to_string(m.bytes) + " bytes)";
  return m;
}

}  // namespace compcoll::calib
