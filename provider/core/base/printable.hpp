// Names from the file system (key file names, paths) and text from files
// (a key's description) shown on a terminal or handed to a PKCS#11 caller
// as a label: a name with control characters must not move the cursor, clear
// the screen or draw lines of its own ("[ok] ..." in tpmkey doctor).
#pragma once

#include <string>
#include <string_view>

namespace tpmkey {

// `text` with what a terminal would act on escaped as `ls -b` does: "\n",
// "\t", "\r", "\a", "\b", "\f", "\v" and "\\" by letter, any other control
// character (C0, DEL, C1) and every byte that is not part of valid UTF-8 as
// "\ooo" (octal). Printable text, UTF-8 included, is unchanged.
std::string printable(std::string_view text);

}  // namespace tpmkey
