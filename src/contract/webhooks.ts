// A workspace's webhook deliveries (/api/v1/webhooks/deliveries): what was sent where, how each
// attempt went, and a way to send one again.
import { type Static, Type } from 'typebox';
import { nullable } from './common.ts';
import { EXAMPLE_DELIVERY } from './examples.ts';

const Status = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]);

export const WebhookDelivery = Type.Object(
  {
    id: Type.String({ description: 'The message id, sent as webhook-id on every attempt' }),
    event: Type.String({ description: 'upload.completed' }),
    file_no: nullable(Type.String({ description: 'The file the event is about' })),
    url: Type.String(),
    status: Status,
    attempts: Type.Integer({ description: 'Attempts made so far' }),
    last_status: nullable(
      Type.Integer({ description: "The receiver's HTTP status on the last attempt, when it answered" }),
    ),
    last_error: nullable(Type.String({ description: 'Why the last attempt failed' })),
    next_attempt_at: nullable(
      Type.String({ format: 'date-time', description: 'When the next attempt is due (pending only)' }),
    ),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { examples: [EXAMPLE_DELIVERY] },
);
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const WebhookDeliveryQuery = Type.Object({
  status: Type.Optional(Status),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
});
export type WebhookDeliveryQuery = Static<typeof WebhookDeliveryQuery>;

export const WebhookDeliveryPage = Type.Object({
  deliveries: Type.Array(WebhookDelivery, { description: 'Newest first' }),
  next_cursor: nullable(Type.String({ description: 'Send as cursor for the next page; null on the last page' })),
});
export type WebhookDeliveryPage = Static<typeof WebhookDeliveryPage>;
export const WebhookDeliveryList = Type.Object({ success: Type.Literal(true), data: WebhookDeliveryPage });

export const WebhookDeliveryParams = Type.Object({ delivery_id: Type.String({ minLength: 1, maxLength: 64 }) });

export const WebhookDeliveryAnswer = Type.Object({ success: Type.Literal(true), data: WebhookDelivery });
