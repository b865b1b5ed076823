-- dbt (dbt-duckdb): build the day's sales and stage them as Parquet for the gate.
-- The post-hook writes the partition to the staging directory; the Python
-- model dqgate_publish.py then runs the gate on it.
{{ config(
    materialized='table',
    post_hook="COPY (SELECT * FROM {{ this }}) TO '{{ var('staging') }}/part-00000.parquet' (FORMAT PARQUET)"
) }}

select *
from {{ source('shop', 'orders') }}
where sales_date = date '{{ var("sales_date") }}'
