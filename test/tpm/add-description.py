#!/usr/bin/env python3
"""add-description.py KEYFILE TEXT: adds description [4] (a UTF8String) to a
TSS2 PRIVATE KEY file in place, before its parent INTEGER, as an earlier
tpmkey-keygen -C and ssh-tpm-agent write it. Standard library only: a
writer of the field that is not tpmkey's."""
import base64
import sys

LABEL = "TSS2 PRIVATE KEY"


def length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, value):
    return bytes([tag]) + length(len(value)) + value


def elements(data):
    out, i = [], 0
    while i < len(data):
        tag, n = data[i], data[i + 1]
        head = 2
        if n & 0x80:
            k = n & 0x7F
            n = int.from_bytes(data[i + 2:i + 2 + k], "big")
            head += k
        out.append(data[i:i + head + n])
        i += head + n
    return out


path, text = sys.argv[1], sys.argv[2]
pem = open(path).read()
body = pem.split("-----BEGIN %s-----" % LABEL)[1].split("-----END %s-----" % LABEL)[0]
der = base64.b64decode("".join(body.split()))
(outer,) = elements(der)
fields = elements(outer[2 + (outer[1] & 0x7F if outer[1] & 0x80 else 0):])
parent = next(i for i, f in enumerate(fields) if f[0] == 0x02)
fields.insert(parent, tlv(0xA4, tlv(0x0C, text.encode("utf-8"))))
new = base64.b64encode(tlv(0x30, b"".join(fields))).decode()
lines = [new[i:i + 64] for i in range(0, len(new), 64)]
with open(path, "w") as f:
    f.write("-----BEGIN %s-----\n%s\n-----END %s-----\n" % (LABEL, "\n".join(lines), LABEL))
