// fs_util.hpp - crash-safe file writes: nothing half-written is ever visible under the final name.
#pragma once
#include <string>
#include <string_view>

namespace bertx {
// Writes to "<path>.tmp", fsyncs it, renames over path, fsyncs the folder. Throws bertx::Error naming path.
void write_file_atomic(const std::string& path, std::string_view content);
// Creates the folder if needed and checks that a file can be made in it. Throws bertx::Error
// "<what> '<dir>': ..." naming the reason (read-only file system, permission denied, ...).
void require_writable_dir(const std::string& dir, const std::string& what);
// fsync a folder (after renames inside it). Throws bertx::Error naming the folder.
void fsync_dir(const std::string& dir);
}  // namespace bertx
