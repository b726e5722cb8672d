#include "conformance/elf_symbols.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace ddph::plugin_checks {
namespace {

// Every offset and size comes from the file, so each is bounds-checked
// against the file's length before use.
bool in_file(const std::string& bytes, uint64_t offset, uint64_t size) {
  return offset <= bytes.size() && size <= bytes.size() - offset;
}

template <class Ehdr, class Shdr, class Sym>
bool read_dynsym(const std::string& bytes, std::vector<std::string>* names, std::string* error) {
  Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (eh.e_shentsize != sizeof(Shdr) ||
      !in_file(bytes, eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Shdr))) {
    *error = "ELF section headers are missing or truncated";
    return false;
  }
  std::vector<Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), bytes.data() + eh.e_shoff, sections.size() * sizeof(Shdr));
  for (const Shdr& s : sections) {
    if (s.sh_type != SHT_DYNSYM) continue;
    if (s.sh_link >= sections.size() || s.sh_entsize != sizeof(Sym) ||
        !in_file(bytes, s.sh_offset, s.sh_size)) {
      *error = "ELF .dynsym section is malformed";
      return false;
    }
    const Shdr& strtab = sections[s.sh_link];
    if (!in_file(bytes, strtab.sh_offset, strtab.sh_size)) {
      *error = "ELF dynamic string table is truncated";
      return false;
    }
    const char* str = bytes.data() + strtab.sh_offset;
    for (uint64_t off = 0; off + sizeof(Sym) <= s.sh_size; off += sizeof(Sym)) {
      Sym sym;
      std::memcpy(&sym, bytes.data() + s.sh_offset + off, sizeof sym);
      const unsigned bind = sym.st_info >> 4, vis = sym.st_other & 0x3;
      if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      if (vis != STV_DEFAULT && vis != STV_PROTECTED) continue;
      if (sym.st_name >= strtab.sh_size) continue;
      names->emplace_back(str + sym.st_name,
                          strnlen(str + sym.st_name, strtab.sh_size - sym.st_name));
    }
    return true;
  }
  *error = "no .dynsym section: not a shared object";
  return false;
}

}  // namespace

bool exported_symbols(const std::string& path, std::vector<std::string>* names,
                      std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
    *error = "not an ELF file";
    return false;
  }
  const bool little = bytes[EI_DATA] == ELFDATA2LSB;
  if (!little) {
    *error = "big-endian ELF is not supported by this reader";
    return false;
  }
  if (bytes[EI_CLASS] == ELFCLASS64 && bytes.size() >= sizeof(Elf64_Ehdr))
    return read_dynsym<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>(bytes, names, error);
  if (bytes[EI_CLASS] == ELFCLASS32 && bytes.size() >= sizeof(Elf32_Ehdr))
    return read_dynsym<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym>(bytes, names, error);
  *error = "truncated ELF header";
  return false;
}

}  // namespace ddph::plugin_checks
