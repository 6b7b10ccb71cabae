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
const commentMarkers = /^(?:\{\/\*+|\/\/+|#+|\/\*+|\*+|<!--|--|;+|%+|"""|''')\s*|\s*(?:\*+\/\}|\*+\/|-->|"""|''')$/g

const ellipsis = /^(?:\.\.\.|…)$/

/** Phrases that stand for omitted code wherever they appear in a comment. */
const strongPhrases: ReadonlyArray<RegExp> = [
  /\b(?:rest|remainder) of (?:the )?(?:code|file|content|contents|implementation|function|class|module|methods|document|section|component|config|configuration|tests|test cases|script|styles|template|markup|query|body|text|lines|list|array|object|data|page)\b/i,
  /\b(?:code|content|implementation|everything else|methods|functions)\b.{0,30}\b(?:unchanged|remains the same|stays the same|as before|omitted|goes here)\b/i,
  /\brest\b.{0,15}\b(?:unchanged|omitted|the same|as before)\b/i,
  /\blines? \d+\s*(?:-|–|to)\s*\d+\b.{0,20}\b(?:unchanged|omitted|as before|the same)\b/i,
  /\b(?:omitted|elided|removed|skipped|shortened|truncated|trimmed)\b.{0,20}\bfor brevity\b/i
]

/**
 * Notes that, alone in a comment, in brackets or after an ellipsis, stand for cut content:
 * "unchanged", "content truncated", "snip", "40 more lines", "existing code", "same as before".
 */
const notePhrases: ReadonlyArray<RegExp> = [
  /^(?:(?:the )?(?:content|contents|code|file|output|text|body|lines?|rest|remainder|response|data|implementation)\s+)?(?:(?:was|is|has been|are)\s+)?(?:truncated|omitted|elided|snipped|snip|unchanged|trimmed|shortened|abbreviated|redacted)$/i,
  /^\d+ (?:more |other |additional |remaining )?(?:lines?|bytes|characters|chars|rows|items|entries|functions|methods)(?: (?:omitted|truncated|elided|hidden|not shown|skipped|removed|unchanged))?$/i,
  /^(?:same as (?:before|above|the original|original)|as before|no changes?|(?:keep|keeps|keeping) (?:the )?(?:rest|existing|original)(?: \w+)?|existing (?:code|content|implementation|imports|methods|functions))$/i
]

/** A phrase that counts only beside an ellipsis or "here" ("// existing code here"). */
const weakPhrase = /\b(?:existing|previous|original|other|remaining|unchanged) (?:code|content|implementation|methods|functions|imports)\b/i

const hasEllipsis = /\.\.\.|…/

const edgeEllipses = /^(?:\.\.\.|…)\s*|\s*(?:\.\.\.|…)$/g

const closing: Readonly<Record<string, string>> = { "(": ")", "[": "]", "<": ">", "{": "}" }

/** The text inside brackets that enclose the whole of `text` ("(truncated)"), if they do. */
const bracketed = (text: string): string | undefined => {
  const match = /^([([<{])(.*)([)\]>}])$/.exec(text)
  if (match === null) return undefined
  return closing[match[1] ?? ""] === match[3] ? (match[2] ?? "").trim() : undefined
}

/** A note without its ellipses, one level of brackets and closing punctuation. */
const noteCore = (text: string): string => {
  const outer = text.replace(edgeEllipses, "").trim()
  const inner = bracketed(outer) ?? outer
  return inner.replace(edgeEllipses, "").replace(/[.:;,!]+$/, "").trim()
}

/**
 * Lines that stand for omitted content ("// ... rest of the code unchanged", a bare "...",
 * "(truncated)", "<!-- unchanged -->", "... (40 more lines)"): written to a file, they destroy
 * what they stand for. A phrase counts in a comment, in brackets that enclose the whole line, or
 * after a leading "..."; a bare "..." (or "[...]") counts everywhere except in Python (`.py`,
 * `.pyi`), whose stubs use it.
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
    const inBrackets = bracketed(bare) !== undefined
    if (!isComment && !inBrackets && !/^(?:\.\.\.|…)/.test(bare)) continue
    const core = noteCore(bare)
    if (core.length === 0) {
      // "[...]", "(…)": an ellipsis in brackets.
      if (hasEllipsis.test(bare) && (isComment || !python)) found.push(trimmed)
      continue
    }
    const weak = weakPhrase.test(bare) && (hasEllipsis.test(bare) || /\bhere\b/i.test(bare))
    if (weak || notePhrases.some((re) => re.test(core)) || strongPhrases.some((re) => re.test(bare))) found.push(trimmed)
  }
  return found
}

/** The entries of `next` that `previous` did not already hold (as many times). */
const added = (previous: ReadonlyArray<string>, next: ReadonlyArray<string>): ReadonlyArray<string> => {
  const before = new Map<string, number>()
  for (const line of previous) before.set(line, (before.get(line) ?? 0) + 1)
  const result: Array<string> = []
  for (const line of next) {
    const left = before.get(line) ?? 0
    if (left > 0) before.set(line, left - 1)
    else result.push(line)
  }
  return result
}

/** Placeholder lines in `next` that `previous` did not already hold. */
export const newPlaceholders = (previous: string, next: string, fileName: string): ReadonlyArray<string> =>
  added(placeholderLines(previous, fileName), placeholderLines(next, fileName))

/**
 * The markers rx itself puts where it cut text: the kernel's `[... N characters omitted ...]`
 * (prompt compaction) and `shell`'s `[... N bytes dropped ...]` (output cap). Text holding one
 * was copied from a cut view: written to a file, it silently loses what was cut.
 */
const rxMarker = /\[\.\.\.\s*\d+\s+(?:characters?|chars|bytes|lines)\s+(?:omitted|dropped|truncated)\s*\.\.\.\]/i

/** Lines of `text` that hold one of rx's own cut markers (each line trimmed). */
export const rxMarkerLines = (text: string): ReadonlyArray<string> =>
  text.split("\n").filter((line) => rxMarker.test(line)).map((line) => line.trim())

/** Lines with rx's cut markers in `next` that `previous` did not already hold. */
export const newRxMarkers = (previous: string, next: string): ReadonlyArray<string> =>
  added(rxMarkerLines(previous), rxMarkerLines(next))
