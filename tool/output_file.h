// Every file the ddph tool writes (the --metrics CSV, the job files `bench
// --overlap` derives) goes through one checked writer: a write, flush or
// close that fails is an error naming the file and the system's reason,
// never a success with nothing written (a full disk, /dev/full, a folder
// that does not exist).
#pragma once

#include <string>

namespace ddph::tool {

class OutputFile {
 public:
  // Creates path, or empties it, for writing. `what` names it in errors (the
  // flag that gave it, "--metrics"). Throws std::runtime_error:
  // "--metrics: cannot create /no/such/m.csv: No such file or directory (the
  // folder /no/such does not exist)".
  OutputFile(std::string path, std::string what);
  // Closes without a check: call close() to know that everything arrived.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Adds text to what flush() writes.
  void write(const std::string& text);
  // Hands everything written so far to the kernel. Throws std::runtime_error
  // "--metrics: cannot write /dev/full: No space left on device".
  void flush();
  // flush(), then close(2), checked (a network filesystem reports late
  // errors there). Later calls do nothing.
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string path_, what_, pending_;
  int fd_ = -1;
};

// Creates or replaces path with text, checked as above.
void write_output_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace ddph::tool
