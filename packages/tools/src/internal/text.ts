/** Byte and text helpers shared by the file tools: hashing, binary detection, placeholders. */
import { createHash } from "node:crypto"

/** The hex sha256 of some bytes. */
export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

const encoder = new TextEncoder()

/** UTF-8 bytes of a string. */
export const utf8 = (text: string): Uint8Array => encoder.encode(text)

const strictDecoder = new TextDecoder("utf-8", { fatal: true })
const lenientDecoder = new TextDecoder("utf-8", { fatal: false })

/** Decode UTF-8, replacing invalid sequences (for output cut at arbitrary byte offsets). */
export const decodeLenient = (bytes: Uint8Array): string => lenientDecoder.decode(bytes)

/** True when the bytes look binary: a NUL byte, or not valid UTF-8. */
export const isBinary = (bytes: Uint8Array): boolean => {
  if (bytes.includes(0)) return true
  try {
    strictDecoder.decode(bytes)
    return false
  } catch {
    return true
  }
}

/**
 * The longest prefix of `bytes` of at most `max` bytes that does not split a UTF-8 sequence.
 */
export const utf8Prefix = (bytes: Uint8Array, max: number): Uint8Array => {
  if (bytes.length <= max) return bytes
  let end = max
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--
  return bytes.subarray(0, end)
}

/** Number of lines: newline characters, plus one for a last line without a newline. */
export const countLines = (text: string): number => {
  if (text.length === 0) return 0
  let lines = 0
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lines++
  return text.endsWith("\n") ? lines : lines + 1
}

// A leading or trailing comment marker; stripped before a line is compared with the phrases.
const commentMarkers = /^(?:\/\/+|#+|\/\*+|\*+|<!--|--|;+|%+|"""|''')\s*|\s*(?:\*+\/|-->|"""|''')$/g

const ellipsis = /^(?:\.\.\.|…)$/

/** Phrases that stand for omitted code wherever they appear in a comment. */
const strongPhrases: ReadonlyArray<RegExp> = [
  /\b(?:rest|remainder) of (?:the )?(?:code|file|content|implementation|function|class|module|methods)\b/i,
  /\b(?:code|content|implementation|everything else|methods|functions)\b.{0,30}\b(?:unchanged|remains the same|stays the same|as before|omitted|goes here)\b/i
]

/** A phrase that counts only beside an ellipsis or "here" ("// existing code here"). */
const weakPhrase = /\b(?:existing|previous|original|other|remaining|unchanged) (?:code|content|implementation|methods|functions|imports)\b/i

const hasEllipsis = /\.\.\.|…/

/**
 * Lines that stand for omitted content ("// ... rest of the code unchanged", a bare "..."):
 * written to a file, they destroy what they stand for. A phrase counts in a comment or after a
 * leading "..."; a bare "..." counts everywhere except in Python (`.py`, `.pyi`), whose stubs use it.
 */
export const placeholderLines = (text: string, fileName: string): ReadonlyArray<string> => {
  const python = /\.pyi?$/.test(fileName)
  const found: Array<string> = []
  for (const line of text.split("\n")) {
    const trimmed = line.trim()
    if (trimmed.length === 0 || trimmed.length > 160) continue
    const bare = trimmed.replace(commentMarkers, "").trim()
    const isComment = bare !== trimmed
    if (ellipsis.test(bare)) {
      if (isComment || !python) found.push(trimmed)
      continue
    }
    if (!isComment && !/^(?:\.\.\.|…)/.test(bare)) continue
    const weak = weakPhrase.test(bare) && (hasEllipsis.test(bare) || /\bhere\b/i.test(bare))
    if (weak || strongPhrases.some((re) => re.test(bare))) found.push(trimmed)
  }
  return found
}

/** Placeholder lines in `next` that `previous` did not already hold. */
export const newPlaceholders = (previous: string, next: string, fileName: string): ReadonlyArray<string> => {
  const before = new Map<string, number>()
  for (const line of placeholderLines(previous, fileName)) before.set(line, (before.get(line) ?? 0) + 1)
  const added: Array<string> = []
  for (const line of placeholderLines(next, fileName)) {
    const left = before.get(line) ?? 0
    if (left > 0) before.set(line, left - 1)
    else added.push(line)
  }
  return added
}
