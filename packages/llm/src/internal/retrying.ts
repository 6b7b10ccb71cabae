/**
 * The retry loop shared by the adapters: attempts under a total timeout, waits from
 * `Retry.delay` (a server's `Retry-After` first), and one `ModelError` at the end that says
 * what went wrong and how many attempts were made.
 */
import { LanguageModel } from "@rx/kernel"
import { Clock, Duration, Effect, Option, Random } from "effect"
import * as Retry from "../Retry.js"

/** Why one attempt failed, already in words a user can act on. */
export interface Failure {
  readonly message: string
  readonly status?: number | undefined
  readonly retryable: boolean
  /** Response headers, for `Retry-After`. */
  readonly headers?: { readonly [name: string]: string | undefined } | undefined
}

export interface Settings {
  /** Names the server in every error. */
  readonly server: string
  readonly policy: Retry.Policy
  /** The whole call, all attempts and waits included. */
  readonly timeoutMs: number
}

/** Run `attempt` until it succeeds, fails for good, runs out of attempts or of time. */
export const run = <A>(settings: Settings, attempt: Effect.Effect<A, Failure>): Effect.Effect<A, LanguageModel.ModelError> =>
  Effect.suspend(() => {
    let attempts = 0
    const fail = (failure: Failure, message: string) =>
      Effect.fail(
        new LanguageModel.ModelError({
          message,
          server: settings.server,
          ...(failure.status === undefined ? {} : { status: failure.status })
        })
      )
    const loop = Effect.gen(function*() {
      const deadline = (yield* Clock.currentTimeMillis) + settings.timeoutMs
      while (true) {
        attempts++
        const result = yield* Effect.either(attempt)
        if (result._tag === "Right") return result.right
        const failure = result.left
        if (!failure.retryable) {
          return yield* fail(failure, attempts > 1 ? `${failure.message} (attempt ${attempts})` : failure.message)
        }
        if (attempts >= settings.policy.maxAttempts) {
          return yield* fail(
            failure,
            attempts > 1 ? `${failure.message} (gave up after ${attempts} attempts)` : failure.message
          )
        }
        const now = yield* Clock.currentTimeMillis
        const asked = failure.headers === undefined ? Option.none() : Retry.retryAfter(failure.headers, now)
        const wait = Retry.delay(settings.policy, attempts, yield* Random.next, asked)
        if (now + Duration.toMillis(wait) >= deadline) {
          return yield* fail(
            failure,
            `${failure.message}; waiting ${
              Duration.format(wait)
            } to retry would pass the total timeout of ${settings.timeoutMs} ms (after ${attempts} attempt${
              attempts === 1 ? "" : "s"
            })`
          )
        }
        yield* Effect.logWarning(`${failure.message}; attempt ${attempts + 1} in ${Duration.format(wait)}`)
        yield* Effect.sleep(wait)
      }
    })
    return loop.pipe(
      Effect.timeoutFail({
        duration: Duration.millis(settings.timeoutMs),
        onTimeout: () =>
          new LanguageModel.ModelError({
            message: `no complete answer from ${settings.server} within ${settings.timeoutMs} ms (total timeout, ${attempts} attempt${
              attempts === 1 ? "" : "s"
            })`,
            server: settings.server
          })
      })
    )
  })
