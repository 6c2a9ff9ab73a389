import { type Static, Type } from "typebox";
import { limits } from "../../limits.ts";
import { MessageId } from "./schemas.ts";

/**
 * A clearing file as the processor uploads it: one JSON object with the file's id and its lines,
 * each line a CLEARING or RETURN message as the messages route takes it. JSON rather than NDJSON:
 * the signed scope already reads JSON bodies (the signature over the exact bytes, then strict
 * parsing), and a file of 100,000 lines is one object either way. The lines are validated one
 * by one by the service, not here, so that a bad line refuses only itself.
 */
export const ClearingFileBody = Type.Object(
  {
    file_id: Type.String({
      ...MessageId,
      description: "The processor's id of the file: a repeat answers the first report again",
    }),
    lines: Type.Array(Type.Unknown(), {
      minItems: 1,
      maxItems: limits.clearingFileLinesMax,
      description: "CLEARING and RETURN messages, each with its own message_id, in the order to apply",
    }),
  },
  { additionalProperties: false },
);
export type ClearingFileBodyType = Static<typeof ClearingFileBody>;

const Cents = (description: string) => Type.Integer({ description });

const Tally = (description: string) =>
  Type.Object({ count: Type.Integer(), amount: Cents("MXN centavos") }, { description });

const LineRef = Type.Object({
  line: Type.Integer({ description: "1-based position in `lines`" }),
  message_id: Type.Union([Type.String(), Type.Null()]),
});

export const ClearingFileReportData = Type.Object({
  file_id: Type.String(),
  lines: Type.Integer(),
  lines_sha256: Type.String({ description: "SHA-256 of the lines (keys sorted): what a repeat must match" }),
  matched: Tally("Clearings of an authorization: its hold settled"),
  force_posts: Tally("Clearings naming no authorization, posted as force posts"),
  returns: Tally("Refunds credited to cards"),
  net: Cents("matched + force_posts - returns: what the file adds to what the issuer owes the network"),
  over_tolerance: Type.Object(
    {
      count: Type.Integer(),
      amount: Cents("MXN centavos"),
      lines: Type.Array(
        Type.Object({ ...LineRef.properties, authorization_id: Type.Union([Type.String(), Type.Null()]) }),
      ),
    },
    { description: "Matched clearings beyond the authorized amount and its tip rule: posted, to dispute" },
  ),
  duplicates: Type.Object(
    { count: Type.Integer(), amount: Cents("MXN centavos"), lines: Type.Array(LineRef) },
    { description: "Lines whose message_id was processed before (an earlier line, or another call)" },
  ),
  refused: Type.Object(
    {
      count: Type.Integer(),
      lines: Type.Array(Type.Object({ ...LineRef.properties, code: Type.Integer(), message: Type.String() })),
    },
    { description: "Lines that moved nothing, each with the catalog error that refused it" },
  ),
  processed_at: Type.String(),
});
export type ClearingFileReport = Static<typeof ClearingFileReportData>;
