"""The local Spark 4 session that the writer corpus and the readers' test
share: two cores, no UI, UTC everywhere, errors only in the log."""


def local_session(app_name):
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
