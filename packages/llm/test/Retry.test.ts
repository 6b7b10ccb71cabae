import { assert, describe, it } from "@effect/vitest"
import { Duration, Option, Schema } from "effect"
import { Retry } from "../src/index.js"

const policy: Retry.Policy = { maxAttempts: 5, baseDelayMs: 200, maxDelayMs: 1_000 }
const ms = (duration: Option.Option<Duration.Duration>) => Option.map(duration, Duration.toMillis)

describe("Retry", () => {
  it("retries 429 and 5xx, and no other status", () => {
    assert.deepStrictEqual([429, 500, 502, 503, 504, 529].map(Retry.isRetryableStatus), [true, true, true, true, true, true])
    assert.deepStrictEqual([400, 401, 403, 404, 408, 409, 413, 422].map(Retry.isRetryableStatus), Array(8).fill(false))
  })

  it("doubles the backoff per attempt, caps it, and keeps half of it fixed", () => {
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 1, 0)), 100)
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 1, 0.999999)), 200)
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 2, 0)), 200)
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 3, 0.5)), 600)
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 10, 0)), 500)
    assert.strictEqual(Duration.toMillis(Retry.backoff(policy, 10, 1)), 1_000)
  })

  it.prop(
    "the backoff stays within [exp/2, exp] for any attempt and jitter",
    [Schema.Int.pipe(Schema.between(1, 60)), Schema.Number.pipe(Schema.between(0, 1))],
    ([attempt, random]) => {
      const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1))
      const wait = Duration.toMillis(Retry.backoff(policy, attempt, random))
      assert.isAtLeast(wait, Math.floor(exp / 2))
      assert.isAtMost(wait, exp)
    }
  )

  it("reads Retry-After in seconds, as an HTTP date, and retry-after-ms", () => {
    const now = Date.parse("Sun, 22 Nov 2026 14:00:00 GMT")
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after": "7" }, now)), Option.some(7_000))
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after": "1.5" }, now)), Option.some(1_500))
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after": "Sun, 22 Nov 2026 14:00:30 GMT" }, now)), Option.some(30_000))
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after": "Sun, 22 Nov 2026 13:00:00 GMT" }, now)), Option.some(0))
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after-ms": "250", "retry-after": "9" }, now)), Option.some(250))
    assert.deepStrictEqual(ms(Retry.retryAfter({ "retry-after": "soon" }, now)), Option.none())
    assert.deepStrictEqual(ms(Retry.retryAfter({}, now)), Option.none())
  })

  it("prefers the server's wait to the backoff", () => {
    assert.strictEqual(Duration.toMillis(Retry.delay(policy, 1, 0, Option.some(Duration.seconds(60)))), 60_000)
    assert.strictEqual(Duration.toMillis(Retry.delay(policy, 1, 0, Option.none())), 100)
  })
})
