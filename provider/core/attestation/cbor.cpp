#include "core/attestation/cbor.hpp"

#include <limits>
#include <type_traits>

namespace tpmkey::cbor {

namespace {

enum Major : std::uint8_t { unsigned_int = 0, negative_int = 1, byte_string = 2, text_string = 3, array = 4, map = 5 };

void put_head(Bytes& out, Major major, std::uint64_t argument) {
    const auto initial = static_cast<std::uint8_t>(major << 5);
    int bytes = 0;
    if (argument < 24) {
        out.push_back(static_cast<std::uint8_t>(initial | argument));
        return;
    }
    if (argument <= 0xff) {
        out.push_back(initial | 24);
        bytes = 1;
    } else if (argument <= 0xffff) {
        out.push_back(initial | 25);
        bytes = 2;
    } else if (argument <= 0xffffffff) {
        out.push_back(initial | 26);
        bytes = 4;
    } else {
        out.push_back(initial | 27);
        bytes = 8;
    }
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(static_cast<std::uint8_t>(argument >> (8 * i)));
}

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::span<const std::uint8_t> s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::uint8_t c = s[i];
        std::size_t n = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1fu;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0fu;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07u;
        } else {
            return false;
        }
        if (i + n >= s.size())
            return false;
        for (std::size_t k = 1; k <= n; ++k) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3fu);
        }
        static constexpr std::uint32_t smallest[] = {0, 0x80, 0x800, 0x10000};
        if (cp < smallest[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

class Decoder {
public:
    Decoder(std::span<const std::uint8_t> data, const std::string& what) : data_(data), what_(what) {}

    Item item(unsigned depth) {
        if (depth > max_depth)
            fail("nested deeper than " + std::to_string(max_depth));
        const std::uint8_t initial = byte();
        const auto major = static_cast<Major>(initial >> 5);
        const std::uint64_t argument = head_argument(initial & 0x1f);
        Item out;
        switch (major) {
        case unsigned_int:
            if (argument > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                fail("an integer out of range");
            out.integer = static_cast<std::int64_t>(argument);
            return out;
        case negative_int:
            if (argument > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                fail("an integer out of range");
            out.integer = -1 - static_cast<std::int64_t>(argument);
            return out;
        case byte_string: {
            out.type = Item::Type::bytes;
            const auto s = take(argument);
            out.bytes.assign(s.begin(), s.end());
            return out;
        }
        case text_string: {
            out.type = Item::Type::text;
            const auto s = take(argument);
            if (!valid_utf8(s))
                fail("a text string that is not UTF-8");
            out.text.assign(s.begin(), s.end());
            return out;
        }
        case array:
            out.type = Item::Type::array;
            count(argument);
            for (std::uint64_t i = 0; i < argument; ++i)
                out.items.push_back(item(depth + 1));
            return out;
        case map:
            out.type = Item::Type::map;
            count(argument);
            for (std::uint64_t i = 0; i < argument; ++i) {
                Item key = item(depth + 1);
                if (key.type != Item::Type::integer && key.type != Item::Type::text)
                    fail("a map key that is neither an integer nor a text string");
                for (const auto& [k, v] : out.entries)
                    if (k.type == key.type && k.integer == key.integer && k.text == key.text)
                        fail("a map key given twice");
                Item value = item(depth + 1);
                out.entries.push_back(Item::Entry{std::move(key), std::move(value)});
            }
            return out;
        default: fail("a tag, a float or a simple value (major type " + std::to_string(major) + ")");
        }
    }

    std::size_t used() const noexcept { return pos_; }

    [[noreturn]] void fail(const std::string& reason) const { throw Error(what_ + ": not valid CBOR: " + reason); }

private:
    std::uint8_t byte() {
        if (pos_ >= data_.size())
            fail("it ends too early");
        return data_[pos_++];
    }
    std::span<const std::uint8_t> take(std::uint64_t size) {
        if (size > data_.size() - pos_)
            fail("a string longer than what is left");
        const auto s = data_.subspan(pos_, static_cast<std::size_t>(size));
        pos_ += static_cast<std::size_t>(size);
        return s;
    }
    // The head's argument in its shortest form only (RFC 8949, 4.2.1).
    std::uint64_t head_argument(std::uint8_t info) {
        if (info < 24)
            return info;
        if (info > 27)
            fail(info == 31 ? "an indefinite length" : "a reserved head");
        const int bytes = 1 << (info - 24);
        std::uint64_t value = 0;
        for (int i = 0; i < bytes; ++i)
            value = (value << 8) | byte();
        const std::uint64_t smallest = info == 24 ? 24 : std::uint64_t{1} << (8 * (bytes / 2));
        if (value < smallest)
            fail("a head longer than needed");
        return value;
    }
    void count(std::uint64_t entries) {
        if (entries > max_items - items_)
            fail("more than " + std::to_string(max_items) + " items");
        items_ += static_cast<std::size_t>(entries);
    }

    std::span<const std::uint8_t> data_;
    const std::string& what_;
    std::size_t pos_ = 0;
    std::size_t items_ = 0;
};

template <class Key>
const Item* find_entry(const Item& map, const Key& key) {
    for (const auto& [k, v] : map.entries) {
        if constexpr (std::is_same_v<Key, std::int64_t>) {
            if (k.type == Item::Type::integer && k.integer == key)
                return &v;
        } else {
            if (k.type == Item::Type::text && k.text == key)
                return &v;
        }
    }
    return nullptr;
}

}  // namespace

void put_int(Bytes& out, std::int64_t value) {
    if (value >= 0)
        put_head(out, unsigned_int, static_cast<std::uint64_t>(value));
    else
        put_head(out, negative_int, static_cast<std::uint64_t>(-1 - value));
}

void put_bytes(Bytes& out, std::span<const std::uint8_t> value) {
    put_head(out, byte_string, value.size());
    out.insert(out.end(), value.begin(), value.end());
}

void put_text(Bytes& out, std::string_view value) {
    put_head(out, text_string, value.size());
    out.insert(out.end(), value.begin(), value.end());
}

void put_array(Bytes& out, std::size_t items) { put_head(out, array, items); }
void put_map(Bytes& out, std::size_t entries) { put_head(out, map, entries); }

const Item* Item::find(std::string_view key) const { return find_entry(*this, key); }
const Item* Item::find(std::int64_t key) const { return find_entry(*this, key); }

Item decode_prefix(std::span<const std::uint8_t> data, std::size_t& used, const std::string& what) {
    Decoder decoder(data, what);
    Item out = decoder.item(0);
    used = decoder.used();
    return out;
}

Item decode(std::span<const std::uint8_t> data, const std::string& what) {
    Decoder decoder(data, what);
    Item out = decoder.item(0);
    if (decoder.used() != data.size())
        decoder.fail(std::to_string(data.size() - decoder.used()) + " bytes after the item");
    return out;
}

}  // namespace tpmkey::cbor
