/**
 * Server-sent events read as they arrive. A streamed answer is parsed line by line while the
 * body is still coming, so its events are decoded before the body ends and nothing but the
 * unfinished line is held: memory is bounded by the longest line, not by the length of the
 * stream. Each `data:` line is one event (as servers send them, and tolerant of a server that
 * leaves out the blank line between events); comments, `event:` and `id:` lines are skipped.
 */
import { Stream } from "effect"

/** What the parser holds between chunks: the text after the last line break. */
export interface State {
  readonly pending: string
}

export const initial: State = { pending: "" }

/** The complete lines of `pending + text` (without their `\n` or `\r\n`), and the rest. */
export const feed = (state: State, text: string): readonly [State, ReadonlyArray<string>] => {
  const parts = (state.pending + text).split("\n")
  const pending = parts.pop() ?? ""
  return [{ pending }, parts.map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line))]
}

/** The last line, when the body ended without a line break after it. */
export const end = (state: State): ReadonlyArray<string> => {
  const line = state.pending.endsWith("\r") ? state.pending.slice(0, -1) : state.pending
  return line === "" ? [] : [line]
}

/** The lines of a body, in order, as its bytes arrive (UTF-8 split anywhere, `\n` or `\r\n` breaks). */
export const lines = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>): Stream.Stream<string, E, R> =>
  bytes.pipe(
    Stream.decodeText(),
    Stream.map((text): string | null => text),
    Stream.concat(Stream.succeed(null)),
    Stream.mapAccum(initial, (state, text) => (text === null ? [initial, end(state)] : feed(state, text))),
    Stream.flattenIterables
  )

/** The payload of a `data:` line, trimmed; `undefined` for any other line. */
export const data = (line: string): string | undefined => (line.startsWith("data:") ? line.slice(5).trim() : undefined)
