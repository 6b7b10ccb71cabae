/**
 * When to try a model request again, and how long to wait first. Pure functions, so the
 * policy is tested without a server; the adapters sleep with Effect's `Clock`.
 */
import { Duration, Option, Schema } from "effect"

/** How many attempts a request gets, and the bounds of the exponential backoff between them. */
export const Policy = Schema.Struct({
  /** Attempts in all, the first one included; 1 disables retries. */
  maxAttempts: Schema.Int.pipe(Schema.between(1, 100)),
  /** The wait before the second attempt, before jitter; it doubles with each attempt. */
  baseDelayMs: Schema.NonNegative,
  /** The longest backoff between two attempts (a server's `Retry-After` is not capped). */
  maxDelayMs: Schema.NonNegative
})
export type Policy = typeof Policy.Type

/** Four attempts, waiting about 0.5 s, 1 s and 2 s, never more than 30 s. */
export const defaultPolicy: Policy = { maxAttempts: 4, baseDelayMs: 500, maxDelayMs: 30_000 }

/**
 * Whether an HTTP status is worth another attempt: 429 (rate limited) and 5xx (server
 * trouble). Other 4xx are mistakes in the request that a retry cannot fix.
 */
export const isRetryableStatus = (status: number): boolean => status === 429 || (status >= 500 && status <= 599)

/**
 * The backoff after a failed attempt (`attempt` counts from 1): `baseDelayMs * 2^(attempt-1)`,
 * capped at `maxDelayMs`, with "equal jitter": half of it fixed, the other half scaled by
 * `random` in [0, 1). The fixed half keeps a lower bound; the random half spreads clients out.
 */
export const backoff = (policy: Policy, attempt: number, random: number): Duration.Duration => {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1))
  const clamped = Math.min(1, Math.max(0, random))
  return Duration.millis(Math.round(exponential / 2 + (exponential / 2) * clamped))
}

/**
 * The wait a server asks for, from `retry-after-ms` (milliseconds, sent by some OpenAI-style
 * servers) or `Retry-After` (seconds, or an HTTP date compared with `nowMs`).
 */
export const retryAfter = (
  headers: { readonly [name: string]: string | undefined },
  nowMs: number
): Option.Option<Duration.Duration> => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined) {
    const value = Number(ms.trim())
    if (ms.trim() !== "" && Number.isFinite(value) && value >= 0) return Option.some(Duration.millis(value))
  }
  const header = headers["retry-after"]
  if (header === undefined || header.trim() === "") return Option.none()
  const text = header.trim()
  if (/^\d+(\.\d+)?$/.test(text)) return Option.some(Duration.millis(Math.round(Number(text) * 1000)))
  const date = Date.parse(text)
  if (Number.isNaN(date)) return Option.none()
  return Option.some(Duration.millis(Math.max(0, date - nowMs)))
}

/** The wait before the next attempt: what the server asked for, else the backoff. */
export const delay = (
  policy: Policy,
  attempt: number,
  random: number,
  serverAsked: Option.Option<Duration.Duration>
): Duration.Duration => Option.getOrElse(serverAsked, () => backoff(policy, attempt, random))
