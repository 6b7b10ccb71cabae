import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, FastCheck as fc, Stream } from "effect"
import * as Sse from "../src/internal/sse.js"

const encoder = new TextEncoder()

/** `text` cut at `cuts` (byte offsets), as a body arrives in chunks. */
const chunked = (text: string, cuts: ReadonlyArray<number>): ReadonlyArray<Uint8Array> => {
  const bytes = encoder.encode(text)
  const at = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b)
  return [...at, bytes.length].map((end, i) => bytes.slice(i === 0 ? 0 : at[i - 1], end))
}

describe("Sse", () => {
  it.effect.prop(
    "the lines of a body are the same however its bytes are cut (UTF-8 and \\r\\n split anywhere)",
    [fc.array(fc.oneof(fc.string(), fc.constantFrom("data: é€😀", "\r", "\n", "\r\n", "data: [DONE]")), { maxLength: 20 }), fc.array(fc.nat(400), { maxLength: 12 })],
    ([pieces, cuts]) =>
      Effect.gen(function*() {
        const body = pieces.join("")
        const lines = yield* Stream.runCollect(Sse.lines(Stream.fromIterable(chunked(body, cuts))))
        // Lines end at "\n", each losing one "\r" before it ("\r\r\n" ends the line "\r"); an empty last one is none.
        const expected = body.split("\n").map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line))
        if (expected.at(-1) === "") expected.pop()
        assert.deepStrictEqual(Chunk.toReadonlyArray(lines), expected)
      })
  )

  it("holds only the unfinished line, however long the stream", () => {
    // 200,000 events in 100,000 chunks, each chunk ending half-way through an event.
    const event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
    const chunk = event + event.slice(0, 20)
    const rest = event.slice(20)
    let state = Sse.initial
    let longest = 0
    let count = 0
    for (let i = 0; i < 100_000; i++) {
      const [next, lines] = Sse.feed(state, i === 0 ? chunk : rest + chunk)
      state = next
      longest = Math.max(longest, state.pending.length)
      count += lines.filter((line) => Sse.data(line) !== undefined).length
    }
    assert.strictEqual(count, 100_000 + 99_999)
    assert.isAtMost(longest, event.length)
  })

  it("reads data lines and nothing else", () => {
    assert.strictEqual(Sse.data("data: {\"a\":1} "), "{\"a\":1}")
    assert.strictEqual(Sse.data("data:[DONE]"), "[DONE]")
    assert.isUndefined(Sse.data(": keep-alive"))
    assert.isUndefined(Sse.data("event: message"))
  })
})
