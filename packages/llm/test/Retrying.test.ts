import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Ref, TestClock } from "effect"
import * as Retrying from "../src/internal/retrying.js"

const settings: Retrying.Settings = { server: "http://127.0.0.1:1/v1", policy: { maxAttempts: 4, baseDelayMs: 500, maxDelayMs: 30_000 }, timeoutMs: 60_000 }

/** An attempt that fails with `failures` in order, then answers "ok"; and how many attempts were made. */
const scripted = (failures: ReadonlyArray<Retrying.Failure>) =>
  Effect.map(Ref.make(0), (count) => ({
    count,
    attempt: Effect.flatMap(Ref.getAndUpdate(count, (n) => n + 1), (n): Effect.Effect<string, Retrying.Failure> => {
      const failure = failures[n]
      return failure === undefined ? Effect.succeed("ok") : Effect.fail(failure)
    })
  }))

const busy: Retrying.Failure = { message: "the server answered 503", status: 503, retryable: true, headers: { "retry-after": "5" } }

describe("Retrying", () => {
  it.effect("waits what Retry-After asks, on the clock, before each new attempt", () =>
    Effect.gen(function*() {
      const { attempt, count } = yield* scripted([busy, busy])
      const fiber = yield* Effect.fork(Retrying.run(settings, attempt))
      yield* TestClock.adjust("4999 millis")
      assert.strictEqual(yield* Ref.get(count), 1)
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Ref.get(count), 2)
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), "ok")
      assert.strictEqual(yield* Ref.get(count), 3)
    }))

  it.effect("backs off without Retry-After, and gives up after the policy's attempts, saying how many", () =>
    Effect.gen(function*() {
      const down: Retrying.Failure = { message: "the server answered 502", status: 502, retryable: true }
      const { attempt, count } = yield* scripted([down, down, down, down, down])
      const fiber = yield* Effect.fork(Effect.flip(Retrying.run(settings, attempt)))
      // Equal jitter: the waits are at least 250, 500 and 1000 ms and at most twice that.
      yield* TestClock.adjust("249 millis")
      assert.strictEqual(yield* Ref.get(count), 1)
      yield* TestClock.adjust("4 seconds")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(yield* Ref.get(count), 4)
      assert.strictEqual(error.message, "the server answered 502 (gave up after 4 attempts)")
      assert.strictEqual(error.status, 502)
    }))

  it.effect("does not retry another 4xx", () =>
    Effect.gen(function*() {
      const { attempt, count } = yield* scripted([{ message: "the server answered 401", status: 401, retryable: false }])
      const error = yield* Effect.flip(Retrying.run(settings, attempt))
      assert.strictEqual(error.message, "the server answered 401")
      assert.strictEqual(yield* Ref.get(count), 1)
    }))

  it.effect("gives up at once when the wait asked for would pass the total timeout", () =>
    Effect.gen(function*() {
      const { attempt, count } = yield* scripted([{ ...busy, headers: { "retry-after": "120" } }])
      const error = yield* Effect.flip(Retrying.run(settings, attempt))
      assert.include(error.message, "waiting 2m to retry would pass the total timeout of 60000 ms (after 1 attempt)")
      assert.strictEqual(yield* Ref.get(count), 1)
    }))

  it.effect("the total timeout ends an attempt that hangs, counting the attempts", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.flip(Retrying.run(settings, Effect.never)))
      yield* TestClock.adjust("60 seconds")
      const error = yield* Fiber.join(fiber)
      assert.include(error.message, "within 60000 ms (total timeout, 1 attempt)")
    }))
})
