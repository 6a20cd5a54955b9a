/** Enumerations shared by several resources (values as the original platform has them). */
export const DURATION_UNITS = ['day', 'week', 'month', 'year'] as const;
