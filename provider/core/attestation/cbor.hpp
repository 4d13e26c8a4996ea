// CBOR (RFC 8949), as much as WebAuthn's attestation objects and COSE keys
// use: unsigned and negative integers, byte and text strings, arrays and
// maps, definite lengths only. The encoder writes the shortest form of
// every head (RFC 8949, 4.2.1, "preferred serialization"); the decoder
// accepts nothing else (no indefinite lengths, no tags, no floats or
// simple values, no longer-than-needed heads, no duplicate map keys, no
// bytes after the item), and bounds the nesting and the number of items,
// so that a hostile file costs little to refuse.
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey::cbor {

// Appends one item, or the head of an array or map (whose items follow).
void put_int(Bytes& out, std::int64_t value);
void put_bytes(Bytes& out, std::span<const std::uint8_t> value);
void put_text(Bytes& out, std::string_view value);
void put_array(Bytes& out, std::size_t items);
void put_map(Bytes& out, std::size_t entries);

struct Item {
    struct Entry;  // a map's key and value
    enum class Type { integer, bytes, text, array, map };
    Type type = Type::integer;
    std::int64_t integer = 0;    // integer: from -2^63 to 2^63-1; others do not fit
    Bytes bytes;                 // bytes
    std::string text;            // text: valid UTF-8
    std::vector<Item> items;     // array
    std::vector<Entry> entries;  // map, in the order read

    // The value of the map entry with that key, or nullptr.
    const Item* find(std::string_view key) const;
    const Item* find(std::int64_t key) const;
};

struct Item::Entry {
    Item key;
    Item value;
};

inline constexpr unsigned max_depth = 8;
inline constexpr std::size_t max_items = 1024;  // all arrays' and maps' entries together

// Decodes exactly one item that fills `data`. Throws Error "WHAT: not
// valid CBOR: REASON" otherwise.
Item decode(std::span<const std::uint8_t> data, const std::string& what);

// Decodes the item at the start of `data`; `used` gets its length (the
// rest is the caller's: a COSE key in authData).
Item decode_prefix(std::span<const std::uint8_t> data, std::size_t& used, const std::string& what);

}  // namespace tpmkey::cbor
