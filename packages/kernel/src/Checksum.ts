/**
 * The checksum a store keeps beside each event's payload: CRC-32 (zlib's, as in gzip and PNG) of
 * the payload's UTF-8 bytes, as a signed 32-bit integer. Anyone can check a row with any CRC-32:
 * `zlib.crc32(payload.encode()) == checksum & 0xffffffff` in Python. A bit flipped in the stored
 * text changes it, which a database's own checks (SQLite's, Postgres's page checksums) never see
 * inside a row. Stores use Node's native `zlib.crc32` where it exists (Node 20.15 and later); this
 * is the same function in plain TypeScript, for the rest.
 */

const table = (() => {
  const t = new Int32Array(256)
  for (let i = 0; i < 256; i++) {
    let c = i
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    t[i] = c
  }
  return t
})()

/** One byte into a running CRC. */
const step = (crc: number, byte: number): number => (table[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8)

/**
 * CRC-32 in JavaScript, over the UTF-8 encoding of `text` (a lone surrogate as U+FFFD, as Node
 * encodes it): the same number as `zlib.crc32`, for Node versions before it (20.15).
 */
export const crc32 = (text: string): number => {
  let crc = -1
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i)
    if (code < 0x80) {
      crc = step(crc, code)
      continue
    }
    if (code >= 0xd800 && code < 0xe000) {
      const low = code < 0xdc00 && i + 1 < text.length ? text.charCodeAt(i + 1) : 0
      if (low >= 0xdc00 && low < 0xe000) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00)
        i++
      } else {
        code = 0xfffd
      }
    }
    if (code < 0x800) {
      crc = step(step(crc, 0xc0 | (code >> 6)), 0x80 | (code & 0x3f))
    } else if (code < 0x10000) {
      crc = step(step(step(crc, 0xe0 | (code >> 12)), 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f))
    } else {
      crc = step(step(step(step(crc, 0xf0 | (code >> 18)), 0x80 | ((code >> 12) & 0x3f)), 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f))
    }
  }
  return crc ^ -1
}
