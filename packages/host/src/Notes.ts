/**
 * Text for a terminal. Every control character a log may carry (from a model, a tool, a file) is
 * shown as `\u001b` and the like instead of reaching the terminal, so no log can retitle the
 * window, move the cursor or hide lines. Tabs and newlines stay.
 */
import { Console } from "effect"

/**
 * Characters a terminal would act on rather than show: C0 controls but tab and newline, DEL,
 * C1 controls (8-bit CSI, OSC, ...), and the Unicode controls that reorder or break lines
 * (bidi overrides and isolates, line and paragraph separators).
 */
const unsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`

/** `text` with its control characters escaped. */
export const terminal = (text: string): string => text.replace(unsafe, escape)

/**
 * A JSON line safe for a terminal: `JSON.stringify` already escapes C0 controls; this escapes
 * the rest (DEL, C1, bidi and line separators) as `\uXXXX`, which decodes to the same value.
 */
export const jsonLine = (json: string): string => json.replace(unsafe, escape)

/** A note on stderr, `rx: note: <text>`, escaped. */
export const note = (text: string) => Console.error(terminal(`rx: note: ${text}`))
