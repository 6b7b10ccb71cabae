/**
 * The rx API from the page: same origin, the bearer token in a header (never in a URL), kept in
 * this tab's sessionStorage. A 401 forgets the token and asks for it again.
 */
import type { Event, Goal, GoalPage } from "./types.js"

const key = "rx.token"

export const token = (): string | null => sessionStorage.getItem(key)
export const remember = (value: string) => sessionStorage.setItem(key, value)
export const forget = () => sessionStorage.removeItem(key)

/** An error of the API, with its body's message. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string, readonly tag: string | undefined) {
    super(message)
  }
}

/** Called when the server refuses the token. */
let onUnauthorized = () => {}
export const whenUnauthorized = (handler: () => void) => {
  onUnauthorized = handler
}

const call = async (path: string, init: RequestInit = {}, given?: string): Promise<Response> => {
  const response = await fetch(path, {
    ...init,
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
    headers: { authorization: `Bearer ${given ?? token() ?? ""}`, ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers }
  })
  if (response.ok) return response
  const body = (await response.json().catch(() => ({}))) as { _tag?: string; message?: string }
  if (response.status === 401 && given === undefined) {
    forget()
    onUnauthorized()
  }
  throw new ApiError(response.status, body.message ?? `${response.status} ${response.statusText}`, body._tag)
}

const json = async <A>(path: string, init: RequestInit = {}): Promise<A> => (await (await call(path, init)).json()) as A

/** Whether `candidate` is the server's token. */
export const check = async (candidate: string): Promise<boolean> => {
  try {
    await call("/v1/goals?limit=1", {}, candidate)
    return true
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return false
    throw error
  }
}

export const list = (status: string, cursor?: string) =>
  json<GoalPage>(`/v1/goals?limit=100${status === "" ? "" : `&status=${encodeURIComponent(status)}`}${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)

const goalPath = (goalId: string) => `/v1/goals/${encodeURIComponent(goalId)}`

export const goal = (goalId: string) => json<Goal>(goalPath(goalId))
export const cancel = (goalId: string) => json<Goal>(`${goalPath(goalId)}/cancel`, { method: "POST" })
export const decide = (goalId: string, callId: string, approve: boolean, reason?: string) =>
  json<Goal>(`${goalPath(goalId)}/approvals/${encodeURIComponent(callId)}`, {
    method: "POST",
    body: JSON.stringify(reason === undefined || reason.trim() === "" ? { approve } : { approve, reason })
  })

/**
 * Follow a goal's events (JSON lines) from after `after`, calling `onEvent` with each event and
 * its line as received, until `Terminated` or `signal` aborts. A dropped connection is resumed
 * after the last event seen.
 */
export const follow = async (
  goalId: string,
  onEvent: (event: Event, line: string) => void,
  signal: AbortSignal,
  after = -1
): Promise<void> => {
  let last = after
  let empties = 0
  while (!signal.aborted) {
    const response = await call(`${goalPath(goalId)}/events${last < 0 ? "" : `?from=${last}`}`, { signal })
    const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader()
    if (reader === undefined) return
    let buffer = ""
    let seen = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += value
      let newline = buffer.indexOf("\n")
      while (newline >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        newline = buffer.indexOf("\n")
        if (line.trim() === "") continue
        const event = JSON.parse(line) as Event
        last = event.seq
        seen++
        onEvent(event, line)
        if (event._tag === "Terminated") return
      }
    }
    empties = seen === 0 ? empties + 1 : 0
    if (empties >= 3) throw new ApiError(0, "the server keeps ending the events before the goal ends", undefined)
    await new Promise((resolve) => setTimeout(resolve, seen === 0 ? 1_000 : 0))
  }
}
