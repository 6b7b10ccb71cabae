/** The shapes of the API this page reads (see @rx/server's `Api`), as plain JSON. */
export type Status = "open" | "waiting" | "terminated"

export interface Goal {
  readonly goalId: string
  readonly goal: string
  /** For a sub-goal: the goal that delegated it. */
  readonly parent: string | null
  /** For a fork (`rx fork`): the goal and step it was forked from. */
  readonly forkedFrom: { readonly goalId: string; readonly iteration: number } | null
  readonly status: Status
  readonly activity: "running" | "queued" | "idle"
  readonly iterations: number
  readonly nextSeq: number
  readonly reason: string | null
  readonly detail?: string
  readonly audit?: { readonly reason: string; readonly seq: number; readonly at: number; readonly detail: string; readonly limit: string; readonly evidence: ReadonlyArray<number> }
  readonly suspended: { readonly reason: string; readonly detail: string; readonly child?: string } | null
  readonly approval: { readonly callId: string; readonly tool: string; readonly input: unknown } | null
  readonly submittedAt: number
  readonly updatedAt: number
}

export interface GoalPage {
  readonly goals: ReadonlyArray<Goal>
  readonly cursor: string | null
}

interface Base {
  readonly goalId: string
  readonly seq: number
  readonly iteration: number
  readonly at: number
}

export interface ToolCall {
  readonly id?: string
  readonly name: string
  readonly arguments: string
}

/** The events of a goal's log (their JSON encoding). */
export type Event = Base & (
  | {
    readonly _tag: "GoalSubmitted"
    readonly goal: string
    readonly options: { readonly maxIterations: number; readonly settings?: { readonly model?: string; readonly workspace?: string } }
    readonly instructions?: string
    /** For a sub-goal: the goal and call that delegated it. */
    readonly parent?: { readonly goalId: string; readonly callId: string; readonly depth: number }
    /** For a fork: the goal and step whose events up to there this log starts with. */
    readonly forkedFrom?: { readonly goalId: string; readonly iteration: number }
    /** For a goal that continues an ended one: that goal, how it ended, and the new instruction. */
    readonly continues?: { readonly goalId: string; readonly reason: string; readonly text: string }
  }
  | { readonly _tag: "ModelResponded"; readonly response: { readonly text: string; readonly toolCalls: ReadonlyArray<ToolCall>; readonly finishReason?: string; readonly usage: { readonly inputTokens: number; readonly outputTokens: number } } }
  | { readonly _tag: "ModelFailed"; readonly message: string }
  | { readonly _tag: "ActionRejected"; readonly kind: string; readonly reason: string; readonly index?: number; readonly tool?: string; readonly raw: string }
  | { readonly _tag: "ToolStarted"; readonly callId: string; readonly tool: string; readonly input: unknown; readonly index?: number }
  | { readonly _tag: "ApprovalRequested"; readonly callId: string; readonly tool: string; readonly input: unknown }
  | { readonly _tag: "ApprovalDecided"; readonly callId: string; readonly approved: boolean; readonly reason: string; readonly by: string }
  | { readonly _tag: "Suspended"; readonly reason: string; readonly detail: string; readonly child?: string }
  | { readonly _tag: "ToolSucceeded"; readonly callId: string; readonly tool: string; readonly output: unknown; readonly durationMs: number }
  | { readonly _tag: "ToolFailed"; readonly callId: string; readonly tool: string; readonly error: { readonly kind: string; readonly message: string }; readonly durationMs: number }
  | { readonly _tag: "IterationCompleted" }
  | { readonly _tag: "CancelRequested"; readonly reason: string }
  | { readonly _tag: "OptionsChanged" }
  | { readonly _tag: "Terminated"; readonly reason: string; readonly detail: string }
  | { readonly _tag: "MessageSent"; readonly by: string; readonly text: string }
  | {
    readonly _tag: "TurnsSummarised"
    readonly from: number
    readonly to: number
    readonly text: string
    readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
    readonly cut?: true
    readonly failed?: string
  }
)

export type Of<T extends Event["_tag"]> = Extract<Event, { readonly _tag: T }>
