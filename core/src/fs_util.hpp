// fs_util.hpp - crash-safe file writes: nothing half-written is ever visible under the final name.
#pragma once
#include <string>
#include <string_view>

namespace bertx {
// Writes to "<path>.tmp", fsyncs it, renames over path, fsyncs the folder. Throws bertx::Error naming path.
void write_file_atomic(const std::string& path, std::string_view content);
// fsync a folder (after renames inside it). Throws bertx::Error naming the folder.
void fsync_dir(const std::string& dir);
}  // namespace bertx
