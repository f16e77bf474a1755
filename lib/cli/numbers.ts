import { UsageError } from './io.js'

/** A whole number of bytes or milliseconds from a flag, refused with the flag's name when it is not one. */
export function parseByteCount(flag: string, value: string): number {
  if (!/^[0-9]+$/.test(value)) throw new UsageError(`${flag} must be a whole number, got "${value}"`)
  return Number(value)
}
