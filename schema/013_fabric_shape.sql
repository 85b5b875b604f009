-- 013: a fabric's layout. A full mesh stops at devices x ports + 1 servers;
-- larger fabrics are a HyperX or a torus grid (planner/plan.h, struct
-- plan_shape). topology is its family (full-mesh, hyperx, torus), shape its
-- grid ("32x16x16"; NULL for a full mesh), and choice, for a fabric whose
-- topology was left to ofcd (auto), the candidates it weighed and why it took
-- the one it took (JSON; NULL otherwise). Re-plans keep the shape.

ALTER TABLE fabric ADD COLUMN topology TEXT NOT NULL DEFAULT 'full-mesh'
	CHECK (topology IN ('full-mesh', 'hyperx', 'torus'));
ALTER TABLE fabric ADD COLUMN shape TEXT;
ALTER TABLE fabric ADD COLUMN choice TEXT;
