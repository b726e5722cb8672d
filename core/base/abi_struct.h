// abi_struct<T>(fields...): the ABI struct T with struct_size set to this
// build's sizeof(T) and every other field, in declaration order (which the
// ABI never changes, it only appends), from `fields`. For the functions that
// make a whole table or spec from their arguments. The braces refuse a
// narrowing conversion, and -Wextra (missing-field-initializers) flags a
// call that leaves out a field the ABI has appended since.
#pragma once

namespace ddph {

template <class T, class... Fields>
T abi_struct(Fields... fields) {
  return T{sizeof(T), fields...};
}

}  // namespace ddph
