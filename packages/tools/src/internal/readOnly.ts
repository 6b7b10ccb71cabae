/**
 * What a read-only tool tells the kernel: a call may run again (a crash never leaves it half
 * done), and its result is all it does and names what it read, so an equal result K times in a
 * row is no progress.
 */
export const readOnly = {
  idempotent: true,
  observation: (_input: unknown, output: unknown): unknown => output
} as const
