/**
 * The retries shared by the adapters: attempts under a total timeout, waits from
 * `Retry.delay` (a server's `Retry-After` first), and one `ModelError` at the end that says
 * what went wrong and how many attempts were made.
 */
import { LanguageModel } from "@rx/kernel"
import { Clock, Duration, Effect, Option, Random, Schedule } from "effect"
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

/**
 * What to do after a failed attempt: wait `wait` and try again, or (no wait) give up with
 * `error`. Decided once per failure, so the jitter drawn for the wait is the one checked
 * against the deadline and the one slept.
 */
interface Verdict {
  readonly error: LanguageModel.ModelError
  readonly wait: Option.Option<Duration.Duration>
  /** Attempts made so far. */
  readonly attempts: number
}

/**
 * Retries as a `Schedule` over verdicts: go on while a verdict says to wait, sleeping that long
 * (on Effect's `Clock`, so `TestClock` drives it in tests), and say each retry in the log.
 */
const schedule = Schedule.identity<Verdict>().pipe(
  Schedule.whileInput((verdict) => Option.isSome(verdict.wait)),
  Schedule.addDelay((verdict: Verdict) => Option.getOrElse(verdict.wait, () => Duration.zero)),
  Schedule.tapInput((verdict: Verdict) =>
    Option.match(verdict.wait, {
      onNone: () => Effect.void,
      onSome: (wait) => Effect.logWarning(`${verdict.error.message}; attempt ${verdict.attempts + 1} in ${Duration.format(wait)}`)
    })
  )
)

/** Run `attempt` until it succeeds, fails for good, runs out of attempts or of time. */
export const run = <A>(settings: Settings, attempt: Effect.Effect<A, Failure>): Effect.Effect<A, LanguageModel.ModelError> =>
  Effect.suspend(() => {
    let attempts = 0
    const error = (failure: Failure, message: string) =>
      new LanguageModel.ModelError({
        message,
        server: settings.server,
        ...(failure.status === undefined ? {} : { status: failure.status })
      })
    /** The verdict on the `attempts`-th failure, `deadline` being when the total timeout ends. */
    const decide = (failure: Failure, deadline: number): Effect.Effect<Verdict> =>
      Effect.gen(function*() {
        const giveUp = (message: string) => ({ error: error(failure, message), wait: Option.none(), attempts })
        if (!failure.retryable) return giveUp(attempts > 1 ? `${failure.message} (attempt ${attempts})` : failure.message)
        if (attempts >= settings.policy.maxAttempts) {
          return giveUp(attempts > 1 ? `${failure.message} (gave up after ${attempts} attempts)` : failure.message)
        }
        const now = yield* Clock.currentTimeMillis
        const asked = failure.headers === undefined ? Option.none() : Retry.retryAfter(failure.headers, now)
        const wait = Retry.delay(settings.policy, attempts, yield* Random.next, asked)
        if (now + Duration.toMillis(wait) >= deadline) {
          return giveUp(
            `${failure.message}; waiting ${Duration.format(wait)} to retry would pass the total timeout of ${settings.timeoutMs} ms (after ${attempts} attempt${
              attempts === 1 ? "" : "s"
            })`
          )
        }
        return { error: error(failure, failure.message), wait: Option.some(wait), attempts }
      })
    return Effect.gen(function*() {
      const deadline = (yield* Clock.currentTimeMillis) + settings.timeoutMs
      const once = Effect.suspend(() => {
        attempts++
        return attempt
      }).pipe(Effect.catchAll((failure) => Effect.flip(decide(failure, deadline))))
      return yield* Effect.retry(once, schedule)
    }).pipe(
      Effect.mapError((verdict) => verdict.error),
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
